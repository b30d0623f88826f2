package resync

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// projectHistory is what a replica remembers of its passes over one project.
type projectHistory struct {
	// reports are the last depth reports, oldest first, aborted ones included, and
	// before them the last completed one when none of them is.
	reports []PassReport
	// completed counts the passes that ran to their end.
	completed int
}

// passHistory remembers the passes of the projects a replica holds, in an LRU.
// Callers hold Resync.mu.
type passHistory struct {
	projects *lru.Cache[string, *projectHistory]
	// depth is how many reports per project are kept; full keeps every line of them.
	depth int
	full  bool
}

// newPassHistory remembers at most projects projects: with depth 0 each one's latest
// report, slimmed; with depth n > 0 the last n reports in full (tests, audits).
func newPassHistory(projects, depth int) (*passHistory, error) {
	c, err := lru.New[string, *projectHistory](projects)
	if err != nil {
		return nil, err
	}
	h := &passHistory{projects: c, depth: depth, full: depth > 0}
	if depth <= 0 {
		h.depth = 1
	}
	return h, nil
}

// add records rep; completed says whether the pass ran to its end.
func (h *passHistory) add(rep PassReport, completed bool) {
	ph, ok := h.projects.Get(rep.Project)
	if !ok {
		ph = &projectHistory{}
	}
	if !h.full {
		rep = slim(rep)
	}
	kept := append(ph.reports, rep)
	if len(kept) > h.depth {
		// Keep the last completed report for LastReport, if the window holds none.
		var last *PassReport
		if !completed {
			last = lastCompleted(kept[:len(kept)-h.depth])
			if lastCompleted(kept[len(kept)-h.depth:]) != nil {
				last = nil
			}
		}
		window := kept[len(kept)-h.depth:]
		kept = make([]PassReport, 0, h.depth+1)
		if last != nil {
			kept = append(kept, *last)
		}
		kept = append(kept, window...)
	}
	ph.reports = kept
	if completed {
		ph.completed++
	}
	h.projects.Add(rep.Project, ph)
}

// lastCompleted returns the last report of reports that ran to its end, or nil.
func lastCompleted(reports []PassReport) *PassReport {
	for i := len(reports) - 1; i >= 0; i-- {
		if reports[i].Aborted == "" {
			return &reports[i]
		}
	}
	return nil
}

// slim drops the lines of the anchors rep kept, counting them in KeptUnlisted.
func slim(rep PassReport) PassReport {
	var lines []AnchorReport
	for _, a := range rep.Anchors {
		if a.Decision == Keep {
			rep.KeptUnlisted++
			continue
		}
		lines = append(lines, a)
	}
	rep.Anchors = lines
	return rep
}

// forget drops what is remembered of project, lost by the replica; full reports stay
// until the LRU drops them.
func (h *passHistory) forget(project string) {
	if !h.full {
		h.projects.Remove(project)
	}
}

// of returns what is remembered of project, without making it more recent.
func (h *passHistory) of(project string) projectHistory {
	ph, ok := h.projects.Peek(project)
	if !ok {
		return projectHistory{}
	}
	return projectHistory{reports: append([]PassReport(nil), ph.reports...), completed: ph.completed}
}

// len is the number of projects remembered.
func (h *passHistory) len() int { return h.projects.Len() }
