package rc

// StreamPosts is streamPosts, for the tests of package rc_test.
const StreamPosts = streamPosts

// ReorderWindow is reorderWindow, for the tests of package rc_test.
const ReorderWindow = reorderWindow
