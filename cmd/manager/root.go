package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"anchorage/internal/version"
	"anchorage/pkg/config"
)

// runners are what the commands do once their command line is parsed and checked.
type runners struct {
	replica func(cmd *cobra.Command, common *commonFlags, f *replicaFlags, l *config.Loaded) error
	sweep   func(cmd *cobra.Command, common *commonFlags, c sweepConfig) error
}

var defaultRunners = runners{replica: runReplica, sweep: runSweep}

// newRootCommand builds `manager`, which runs a replica as `manager run` does, and its
// subcommands; the common flags are persistent, accepted before or after a subcommand.
func newRootCommand(r runners) *cobra.Command {
	var common commonFlags
	root := &cobra.Command{
		Use:   "manager",
		Short: "anchorage's controller manager",
		Long: "manager runs one anchorage replica: it joins the replicas' membership on the hub, takes its share of\n" +
			"projects, programs their gateways and resyncs their anchors (docs/operations.md).\n" +
			"With no subcommand it runs a replica, as `manager run` does.",
		Args:              cobra.NoArgs,
		Version:           version.Get().String(),
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, c.CommandPath())
	})
	common.register(root.PersistentFlags())
	// Ours, so that cobra does not take -v for it.
	root.Flags().Bool("version", false, "print the version and exit")

	run := runCommand(&common, r)
	root.RunE = run.RunE
	root.Flags().AddFlagSet(run.Flags())
	root.AddCommand(run, sweepCommand(&common, r), versionCommand())
	return root
}

// runCommand is `manager run`; root runs the same function with the same flags.
func runCommand(common *commonFlags, r runners) *cobra.Command {
	var f replicaFlags
	run := &cobra.Command{
		Use:   "run",
		Short: "Run one replica (what manager does with no subcommand)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			l, err := common.load()
			if err != nil {
				return err
			}
			return r.replica(cmd, common, &f, l)
		},
	}
	f.register(run.Flags())
	return run
}

func sweepCommand(common *commonFlags, r runners) *cobra.Command {
	var s sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep --once",
		Short: "Run one anchor resync pass over every project, without sharding, and print what it decided",
		Long: "sweep runs one anchor resync pass over every project (or those --project names) and prints a row per\n" +
			"project, then the anchors whose project has no kubeconfig Secret. It is a dry run unless --delete is\n" +
			"given; a deleting sweep is refused while replicas hold valid member Leases, unless --force.\n" +
			"With --cut-over-check it runs no pass: it reads the hub and every project's plane, changes nothing, and\n" +
			"prints one row per finding about the cut-over from the previous manager (blocked, changed, adopted, left);\n" +
			"it exits with code 3 when a row is blocked. Given the previous manager's configuration as --config, it also prints\n" +
			"a row per key of it: what the key became here (adopted), or why it is not served (left, or changed when a\n" +
			"tenant loses what it did).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := common.load()
			if err != nil {
				return err
			}
			c, err := s.config(l)
			if err != nil {
				return err
			}
			return r.sweep(cmd, common, c)
		},
	}
	s.register(cmd.Flags())
	return cmd
}

func versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the build's version, commit and date",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, w := version.Get(), cmd.OutOrStdout()
			switch output {
			case "":
				_, err := fmt.Fprintln(w, info.String())
				return err
			case "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return fmt.Errorf("--output %q: want json, or nothing for one line", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: empty for one line, or json")
	return cmd
}
