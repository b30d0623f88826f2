package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A plane's 10 MB error cannot make a condition or an Event unwritable.
func TestBoundedMessage(t *testing.T) {
	if got := boundedMessage("short"); got != "short" {
		t.Errorf("a short message is changed: %q", got)
	}
	for _, huge := range []string{strings.Repeat("x", 10<<20), strings.Repeat("é", 3000)} {
		got := boundedMessage(huge)
		if len(got) > maxMessage || !strings.HasSuffix(got, "(truncated)") || !utf8.ValidString(got) {
			t.Errorf("a %d-byte message became %d bytes (valid UTF-8 %v): %q…", len(huge), len(got), utf8.ValidString(got), got[:40])
		}
	}
	v := verdict{false, "HubWriteFailed", strings.Repeat("y", 1<<20)}
	if c := v.condition("Programmed", 1); len(c.Message) > maxMessage {
		t.Errorf("condition message of %d bytes", len(c.Message))
	}
}
