package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Rules is `scrubd rules list|get|add|delete|replace`.
func Rules(args []string, stdout, stderr io.Writer) int {
	return rulesCmd(args, os.Stdin, stdout, stderr)
}

const rulesUsage = `usage: scrubd rules [--socket PATH | --addr HOST:PORT --token-file F [--tls] [--ca-file F] [--cert-file F --key-file F]] [--json] COMMAND
  list                 every rule with its source, placement, reason and hw/sw counters
                       (--limit N [--after ID]: one page; the next page's --after is printed on stderr)
  get ID               one rule
  add FILE|-           add the rules of a rule file, all or none (or one rule as YAML/JSON)
  delete ID            delete an API rule
  replace FILE|-       replace every API rule with a rule file's rules`

func rulesCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", "/run/scrubd/api.sock", "API unix socket")
	addr := fs.String("addr", "", "API TCP address (needs --token-file)")
	tokenFile := fs.String("token-file", "", "file holding the API bearer token")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "list: at most this many rules (0: all)")
	after := fs.String("after", "", "list: the rules after this rule id (the previous page's last)")
	useTLS := fs.Bool("tls", false, "--addr: TLS, verifying the agent with the system's CAs (implied by --ca-file and --cert-file)")
	caFile := fs.String("ca-file", "", "--addr: TLS, verifying the agent's certificate with this CA (PEM)")
	certFile := fs.String("cert-file", "", "--addr: client certificate (PEM) for mutual TLS")
	keyFile := fs.String("key-file", "", "--addr: the client certificate's key (PEM)")
	fs.Usage = func() { fmt.Fprintln(stderr, rulesUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	var c *api.Client
	if *addr != "" {
		if *tokenFile == "" {
			fmt.Fprintln(stderr, "scrubd rules: --addr needs --token-file")
			return 2
		}
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, "scrubd rules:", err)
			return 2
		}
		token := strings.TrimSpace(string(tok))
		if *useTLS || *caFile != "" || *certFile != "" || *keyFile != "" {
			tc, err := clientTLS(*caFile, *certFile, *keyFile)
			if err != nil {
				fmt.Fprintln(stderr, "scrubd rules:", err)
				return 2
			}
			c = api.NewTLSClient(*addr, token, tc)
		} else {
			c = api.NewTCPClient(*addr, token)
		}
	} else {
		c = api.NewUnixClient(*sock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(name string) ([]byte, error) {
		if name == "-" {
			return io.ReadAll(stdin)
		}
		return os.ReadFile(name)
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "scrubd rules:", err); return 1 }
	out := func(v any) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	switch cmd := rest[0]; {
	case cmd == "list" && len(rest) == 1:
		if *limit < 0 {
			return fail(fmt.Errorf("--limit %d: must not be negative", *limit))
		}
		list, next, err := c.ListPage(ctx, *after, *limit)
		if err != nil {
			return fail(err)
		}
		if next != "" {
			defer fmt.Fprintf(stderr, "scrubd rules: more rules follow: next page with --after %s\n", next)
		}
		if *asJSON {
			out(list)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSOURCE\tSTATUS\tPATH\tHW PKTS\tSW PKTS\tPPS\tREASON")
		for _, r := range list {
			why := r.Placement
			if r.Status != "active" {
				why = r.Reason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f\t%s\n", r.Rule.ID, r.Source, r.Status, r.Path, r.HW.Packets, r.SW.Packets, r.PPS, why)
		}
		tw.Flush()
		return 0
	case cmd == "get" && len(rest) == 2:
		r, err := c.Get(ctx, rest[1])
		if err != nil {
			return fail(err)
		}
		out(r)
		return 0
	case cmd == "delete" && len(rest) == 2:
		if err := c.Delete(ctx, rest[1]); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "deleted %s\n", rest[1])
		return 0
	case cmd == "add" && len(rest) == 2:
		data, err := read(rest[1])
		if err != nil {
			return fail(err)
		}
		// A rule file is added whole or not at all; anything else is one rule.
		set, perr := rule.Parse(rest[1], data, time.Now())
		if perr != nil || len(set.Rules) == 0 {
			r, err := c.Add(ctx, data)
			if err != nil {
				if perr != nil {
					return fail(fmt.Errorf("%v (as a rule file: %v)", err, perr))
				}
				return fail(err)
			}
			fmt.Fprintf(stdout, "added %s: %s %s\n", r.Rule.ID, r.Path, r.Placement)
			return 0
		}
		// All or none: the agent adds the file's rules in one step.
		added, err := c.AddFile(ctx, data)
		if err != nil {
			return fail(err)
		}
		for _, ri := range added {
			fmt.Fprintf(stdout, "added %s: %s %s\n", ri.Rule.ID, ri.Path, ri.Placement)
		}
		return 0
	case cmd == "replace" && len(rest) == 2:
		data, err := read(rest[1])
		if err != nil {
			return fail(err)
		}
		res, err := c.Replace(ctx, data)
		if err != nil {
			return fail(err)
		}
		out(res)
		return 0
	}
	fs.Usage()
	return 2
}

// clientTLS is the TLS configuration of `scrubd rules --addr`: the CA that
// signed the agent's certificate (the system's CAs without one) and, for
// mutual TLS, a client certificate and key.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("--cert-file and --key-file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
