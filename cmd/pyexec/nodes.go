package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newNodesCmd() *cobra.Command {
	return newClientCmd("nodes", "List the live nodes of the server's fleet and their load", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			list, err := o.newClient().ListNodes(cmd.Context())
			if err != nil {
				return exitClientError, err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.json:
				return 0, printJSON(out, list)
			case o.quiet:
				for _, n := range list.Nodes {
					fmt.Fprintln(out, n.Name)
				}
				return 0, nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tSTATE\tRUNNING\tQUEUED\tSESSIONS\tWARM\tLOAD\tVERSION\tUP")
			now := time.Now()
			for _, n := range list.Nodes {
				state := "ready"
				if n.Draining {
					state = "draining"
				}
				warm := "-"
				if n.WarmJails != nil {
					warm = strconv.Itoa(*n.WarmJails)
				}
				version := n.Version
				if version == "" {
					version = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d/%d\t%d/%d\t%s\t%.2f/%d\t%s\t%s\n", n.Name, state,
					n.Running, n.Capacity, n.Queued, n.QueueSize, n.Sessions, n.SessionCapacity, warm,
					n.Load1, n.CPUs, version, now.Sub(n.StartedAt).Truncate(time.Second))
			}
			if err := tw.Flush(); err != nil {
				return exitClientError, fmt.Errorf("writing list: %w", err)
			}
			return 0, nil
		})
}
