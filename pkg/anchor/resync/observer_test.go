package resync

import "sync"

// passLog is an Observer keeping every report of the passes that were not aborted.
type passLog struct {
	mu      sync.Mutex
	reports map[string][]PassReport
}

func (l *passLog) Examined(Examination) {}

func (l *passLog) PassDone(rep PassReport, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reports == nil {
		l.reports = map[string][]PassReport{}
	}
	l.reports[rep.Project] = append(l.reports[rep.Project], rep)
}

// Reports returns the reports of passes over project, oldest first.
func (l *passLog) Reports(project string) []PassReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]PassReport(nil), l.reports[project]...)
}

// LastReport returns the report of the last pass over project that ran to its end.
func (l *passLog) LastReport(project string) (PassReport, bool) {
	h := l.Reports(project)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Aborted == "" {
			return h[i], true
		}
	}
	return PassReport{}, false
}
