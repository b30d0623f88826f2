package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the harness reads.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

func (e auditEvent) succeeded() bool {
	return e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

func (e auditEvent) isWrite() bool {
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
func (c auditCursor) read() ([]auditEvent, error) {
	f, err := os.Open(c.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(c.offset, io.SeekStart); err != nil {
		return nil, err
	}
	var out []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: parsing audit line: %w", c.path, err)
		}
		out = append(out, e)
	}
	return out, s.Err()
}

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
