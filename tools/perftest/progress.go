package perftest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// progress counts a run's completed iterations for the progress line.
type progress struct {
	done, total atomic.Uint64
	runStart    atomic.Int64 // unix nanoseconds

	mu    sync.Mutex
	shown bool // guarded by mu: a progress line is on the terminal
}

// progressDelay is how long a run lasts before the progress line shows
// (a variable for tests).
var progressDelay = 2 * time.Second

// progressTick is how often the progress line is refreshed.
var progressTick = 500 * time.Millisecond

// startProgress shows a progress line on env.Progress, refreshed twice a
// second, while a run lasts longer than progressDelay. The returned
// function stops it and clears the line.
func (s *session) startProgress() func() {
	w := s.env.Progress
	if w == nil {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			st := s.prog.runStart.Load()
			if st == 0 {
				continue
			}
			el := time.Since(time.Unix(0, st))
			if el < progressDelay {
				continue
			}
			d, tot := s.prog.done.Load(), s.prog.total.Load()
			line := fmt.Sprintf("%s: %d iterations, %.1f s", s.cfg.Tool(), d, el.Seconds())
			if s.cfg.Duration > 0 {
				line = fmt.Sprintf("%s: %d iterations, %.0f of %.0f s", s.cfg.Tool(), d, el.Seconds(), s.cfg.Duration.Seconds())
			} else if tot > 0 {
				line = fmt.Sprintf("%s: %d/%d iterations (%d%%), %.1f s", s.cfg.Tool(), d, tot, d*100/tot, el.Seconds())
			}
			s.prog.mu.Lock()
			fmt.Fprintf(w, "\r%s\x1b[K", line)
			s.prog.shown = true
			s.prog.mu.Unlock()
		}
	}()
	return func() {
		close(stop)
		<-done
		s.clearProgress()
	}
}

// clearProgress erases the progress line, if one is shown, so a result
// line can be printed.
func (s *session) clearProgress() {
	s.prog.runStart.Store(0)
	if s.env.Progress == nil {
		return
	}
	s.prog.mu.Lock()
	if s.prog.shown {
		fmt.Fprint(s.env.Progress, "\r\x1b[K")
		s.prog.shown = false
	}
	s.prog.mu.Unlock()
}
