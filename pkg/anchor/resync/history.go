package resync

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// historyLength is how many reports per project are kept for Reports.
const historyLength = 16

// projectHistory is what a replica remembers of its passes over one project.
type projectHistory struct {
	// reports are the last historyLength reports, oldest first, aborted passes included.
	reports []PassReport
	// completed counts the passes that ran to their end.
	completed int
}

// passHistory remembers the passes of the projects a replica passed over most recently.
// Projects move between replicas and are created and deleted all the time; a replica
// that runs for months must not keep a report for every project it ever held. The
// least recently passed project is forgotten first, so with a bound above the number of
// projects a replica holds, only projects it no longer holds are ever forgotten.
// Callers hold Resync.mu.
type passHistory struct {
	projects *lru.Cache[string, *projectHistory]
}

func newPassHistory(projects int) (*passHistory, error) {
	c, err := lru.New[string, *projectHistory](projects)
	if err != nil {
		return nil, err
	}
	return &passHistory{projects: c}, nil
}

// add records rep; completed says whether the pass ran to its end.
func (h *passHistory) add(rep PassReport, completed bool) {
	ph, ok := h.projects.Get(rep.Project)
	if !ok {
		ph = &projectHistory{}
	}
	ph.reports = append(ph.reports, rep)
	if len(ph.reports) > historyLength {
		ph.reports = append([]PassReport(nil), ph.reports[len(ph.reports)-historyLength:]...)
	}
	if completed {
		ph.completed++
	}
	h.projects.Add(rep.Project, ph)
}

// of returns what is remembered of project, without making it more recent: reading a
// report is not a pass.
func (h *passHistory) of(project string) projectHistory {
	ph, ok := h.projects.Peek(project)
	if !ok {
		return projectHistory{}
	}
	return projectHistory{reports: append([]PassReport(nil), ph.reports...), completed: ph.completed}
}

// len is the number of projects remembered.
func (h *passHistory) len() int { return h.projects.Len() }
