package gateway

import "unicode/utf8"

// maxMessage bounds a condition message or an Event note: a huge error from a plane
// must not make the write fail, and the events API refuses notes over 1 KiB.
const maxMessage = 1000

// boundedMessage returns s cut to maxMessage bytes on a rune boundary, saying so.
func boundedMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	const mark = " … (truncated)"
	cut := maxMessage - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
