// Narration: the elapsed-time stamp, the numbered steps and the indented lines of the story.

package main

import (
	"fmt"
	"time"
)

func (d *demo) elapsed() string {
	return fmt.Sprintf("[%5.1fs]", time.Since(d.began).Seconds())
}

// step starts a numbered part of the story.
func (d *demo) step(n int, title string) {
	fmt.Fprintf(d.out, "\n%s %d. %s\n", d.elapsed(), n, title)
}

// say narrates one line under the current step.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "         %s\n", fmt.Sprintf(format, args...))
}
