package bench

import (
	"os"
	"strings"

	"anchorage/internal/harness"
)

type auditEvent = harness.AuditEvent

func succeeded(e auditEvent) bool { return e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300 }

func isWrite(e auditEvent) bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// auditCursor reads an audit log from where a run started.
type auditCursor struct {
	path   string
	offset int64
}

// markAudit remembers the current end of the log at path.
func markAudit(path string) auditCursor {
	st, err := os.Stat(path)
	if err != nil {
		return auditCursor{path: path}
	}
	return auditCursor{path: path, offset: st.Size()}
}

// read returns every event written since the mark.
func (c auditCursor) read() ([]auditEvent, error) { return harness.ReadAuditLog(c.path, c.offset) }

// writerOf attributes an event to a replica of the run: by its hub user, else by the
// user agent every replica sets ("anchorage/<name>", the only attribution on project
// planes, where replicas share the project's kubeconfig user).
func writerOf(e auditEvent, byUser map[string]string, names map[string]bool) string {
	if r, ok := byUser[e.User.Username]; ok {
		return r
	}
	ua, ok := strings.CutPrefix(e.UserAgent, "anchorage/")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(ua, " ("); i >= 0 {
		ua = ua[:i]
	}
	if names[ua] {
		return ua
	}
	return ""
}
