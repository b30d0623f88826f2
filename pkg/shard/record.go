package shard

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Record is one admitted unit of work, for tests, audits and benchmarks; in a record
// file it is one JSON object per line.
type Record struct {
	Replica    string    `json:"replica"` // set by FileRecorder, from Holder
	Holder     string    `json:"holder"`
	Project    string    `json:"project"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	ValidUntil time.Time `json:"validUntil,omitzero"`
	Claim      string    `json:"claim,omitempty"` // the engagement the work ran under
}

// Recorder receives Records.
type Recorder interface{ Record(Record) }

// FileRecorder appends Records as JSON lines, one write(2) each; errors are only counted.
type FileRecorder struct {
	mu     sync.Mutex
	f      *os.File
	failed int
}

// NewFileRecorder opens (creating or appending to) path.
func NewFileRecorder(path string) (*FileRecorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening record file: %w", err)
	}
	return &FileRecorder{f: f}, nil
}

// Record implements Recorder.
func (r *FileRecorder) Record(rec Record) {
	rec.Replica = PodOf(rec.Holder)
	line, err := json.Marshal(rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		_, err = r.f.Write(append(line, '\n'))
	}
	if err != nil {
		r.failed++
	}
}

// Failed returns how many records could not be written.
func (r *FileRecorder) Failed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Close closes the file.
func (r *FileRecorder) Close() error { return r.f.Close() }
