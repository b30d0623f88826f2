package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"anchorage/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the ## Flags section of docs/operations.md from the command definitions")

// regenerate is how to bring the doc back in line, printed when it is not.
const regenerate = "go test ./cmd/manager -run TestFlagTable -update"

// flagsHeading starts the generated section; it runs to the end of docs/operations.md.
const flagsHeading = "## Flags\n"

// TestFlagTable: the ## Flags section of docs/operations.md is the flag table rendered
// from the cobra commands (name, default, meaning), so the documented defaults are the
// binary's.
func TestFlagTable(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "docs", "operations.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(doc), "\n"+flagsHeading)
	if at < 0 {
		t.Fatalf("docs/operations.md has no %q section", strings.TrimSpace(flagsHeading))
	}
	head, section := string(doc[:at+1]), string(doc[at+1:])
	want := renderFlagSection(newRootCommand(defaultRunners))
	if section == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(head+want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the flag table in %s", path)
		return
	}
	t.Errorf("the flag table in docs/operations.md differs from the commands' flags (-doc +commands); run `%s`:\n%s", regenerate, cmp.Diff(section, want))
}

// renderFlagSection renders the ## Flags section: a table for the replica and one for
// the sweep.
func renderFlagSection(root *cobra.Command) string {
	sweep, _, err := root.Find([]string{"sweep"})
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	b.WriteString(flagsHeading)
	fmt.Fprintf(&b, "\n<!-- Generated from cmd/manager's command definitions by `%s`: change a flag's usage there, not here. -->\n\n", regenerate)
	b.WriteString("`manager` (or `manager run`) runs a replica; `manager sweep --once` runs one resync pass for an\n" +
		"operator; `manager version` (or `manager --version`) prints the build, `-o json` as JSON; `manager help`\n" +
		"and `-h` print help on stdout. The flags the replica and the sweep share (`--kubeconfig`, the namespaces,\n" +
		"the log flags) go before or after the subcommand. `--log-level` and `--zap-log-level` set the same\n" +
		"level: when both are given, the later one on the command line wins. Logs are JSON lines on stderr,\n" +
		"client-go's included. A bad flag or an unreachable hub ends the process with exit code 1 and one line\n" +
		"on stderr, `manager: <error>` (`manager sweep: <error>` for the sweep). `manager sweep --cut-over-check`\n" +
		"(read-only, implies `--once`) exits with code 3 and one summary line on stderr when a row is blocked,\n" +
		"0 when none is (*Cut-over from the previous manager*).\n")
	b.WriteString("\n### manager\n\n")
	writeFlagTable(&b, root)
	b.WriteString("\n### manager sweep\n\n")
	writeFlagTable(&b, sweep)
	return b.String()
}

// writeFlagTable writes cmd's flags, its own and inherited, sorted by name; help and
// version are left out.
func writeFlagTable(b *strings.Builder, cmd *cobra.Command) {
	all := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	all.AddFlagSet(cmd.LocalFlags())
	all.AddFlagSet(cmd.InheritedFlags())
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	all.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "version" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" || f.DefValue == "[]" {
			def = ""
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", name, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
}
