package harness

import (
	"sync"

	"anchorage/pkg/anchor/resync"
)

// PassLog is a resync.Observer that keeps every examination and every pass report of
// one replica, aborted passes included (Manager.ResyncLog): an aborted pass may have
// deleted anchors before it ended.
type PassLog struct {
	mu        sync.Mutex
	reports   map[string][]resync.PassReport
	completed map[string]int
	examined  []resync.Examination
}

func NewPassLog() *PassLog {
	return &PassLog{reports: map[string][]resync.PassReport{}, completed: map[string]int{}}
}

func (l *PassLog) Examined(x resync.Examination) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.examined = append(l.examined, x)
}

func (l *PassLog) PassDone(rep resync.PassReport, completed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports[rep.Project] = append(l.reports[rep.Project], rep)
	if completed {
		l.completed[rep.Project]++
	}
}

// Passes returns how many passes over project ran to their end.
func (l *PassLog) Passes(project string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.completed[project]
}

// Reports returns the reports of the passes over project, oldest first.
func (l *PassLog) Reports(project string) []resync.PassReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]resync.PassReport(nil), l.reports[project]...)
}

// LastReport returns the report of the last pass over project that ran to its end.
func (l *PassLog) LastReport(project string) (resync.PassReport, bool) {
	h := l.Reports(project)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Aborted == "" {
			return h[i], true
		}
	}
	return resync.PassReport{}, false
}

// Examinations returns every examination so far.
func (l *PassLog) Examinations() []resync.Examination {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]resync.Examination(nil), l.examined...)
}
