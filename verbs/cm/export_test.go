package cm

// NumIDs is the number of live IDs of the CM and of IB CM IDs of its
// devices' agents: the tests' leak check.
func (c *CM) NumIDs() (ids, ibIDs int) {
	c.mu.Lock()
	ids = len(c.ids)
	c.mu.Unlock()
	for _, d := range c.devs {
		ibIDs += d.agent.IDs()
	}
	return ids, ibIDs
}
