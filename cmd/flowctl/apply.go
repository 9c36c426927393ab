package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"flowservice/pkg/automation"
)

// Portable flows (docs/environments.md): `flowctl export` writes flows as
// files, `flowctl apply` makes a server's flows match a set of files.

// flowFileSuffix names the files export writes and apply reads from a
// directory.
const flowFileSuffix = ".flow.json"

// exitError ends flowctl with a code and no message: `apply --dry-run`
// exits 2 when the plan has changes, as `terraform plan -detailed-exitcode`.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (c *cli) exportCmd() *cobra.Command {
	var dir string
	var all bool
	cmd := &cobra.Command{
		Use:   "export [FLOW_ID] [--all -d DIR]",
		Short: "Export a flow as a portable document, or every flow into DIR as <name>.flow.json",
		Long: `export prints one flow's portable document (connections by name, inline
secrets as "********", variable references as they are), or with --all
writes every flow of the project into DIR, one <name>.flow.json each, ready
for 'flowctl apply -f DIR' on another installation.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			switch {
			case all && len(args) > 0:
				return fmt.Errorf("unexpected argument %q: --all exports every flow", args[0])
			case all && dir == "":
				return errors.New("--all needs -d DIR, the directory to write the files to")
			case all:
				return c.exportAll(ctx, api, dir)
			case len(args) != 1:
				return fmt.Errorf("missing FLOW_ID, or --all -d DIR (usage: %s)", cmd.UseLine())
			}
			raw, err := api.do(ctx, http.MethodGet, "/api/v1/flows/"+url.PathEscape(args[0])+"/export", nil, nil, nil)
			if err != nil {
				return err
			}
			return c.printJSON(raw)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "export every flow of the project")
	cmd.Flags().StringVarP(&dir, "dir", "d", "", "with --all: the directory to write <name>.flow.json files to (made if missing)")
	return cmd
}

// exportAll writes every flow's document into dir. Two flows with one
// name would make one file: refused, as apply would refuse them.
func (c *cli) exportAll(ctx context.Context, api *client, dir string) error {
	p, _, err := fetchList[automation.FlowSummary](ctx, api, "/api/v1/flows", url.Values{"limit": {"100"}}, true)
	if err != nil {
		return err
	}
	files := map[string]string{}
	for _, f := range p.Data {
		name := fileName(f.Name)
		if other, ok := files[name]; ok {
			return fmt.Errorf("flows %s and %s would both be written to %s: rename one (apply matches flows by name)", other, f.ID, name)
		}
		files[name] = f.ID
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, f := range p.Data {
		raw, err := api.do(ctx, http.MethodGet, "/api/v1/flows/"+url.PathEscape(f.ID)+"/export", nil, nil, nil)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("export %s: the server's answer is not JSON: %w", f.ID, err)
		}
		buf.WriteByte('\n')
		path := filepath.Join(dir, fileName(f.Name))
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if c.output != "json" {
			fmt.Fprintf(c.stdout, "%s -> %s\n", f.Name, path)
		}
	}
	return nil
}

// fileName is a flow's file name: its name with path separators and other
// characters file systems refuse replaced by "_".
func fileName(name string) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || strings.ContainsRune(`/\:*?"<>|`, r) {
			return '_'
		}
		return r
	}, name)
	if clean == "" || clean == "." || clean == ".." {
		clean = "_"
	}
	return clean + flowFileSuffix
}

// flowFile is one document read for apply.
type flowFile struct {
	path string
	doc  automation.FlowDocument
	raw  json.RawMessage // as read, for the comparison with the server's export
}

// change is one line of an apply plan.
type change struct {
	op   string // "+", "~", "=", "-"
	name string
	id   string // the live flow, for ~ and -
	file *flowFile
	// differences are the parts a ~ changes, as the server compared them
	// ("description", "definition.steps", ...).
	differences []string
}

func (ch change) String() string {
	switch ch.op {
	case "+":
		return "+ create " + ch.name
	case "~":
		return "~ update " + ch.name + " (" + ch.id + "): " + strings.Join(ch.differences, ", ")
	case "-":
		return "- delete " + ch.name + " (" + ch.id + ")"
	}
	return "= unchanged " + ch.name
}

func (c *cli) applyCmd() *cobra.Command {
	var paths []string
	var prune, dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f PATH... [--prune] [--dry-run]",
		Short: "Make the server's flows match flow files: create, update (and with --prune delete) by name",
		Long: `apply reads flow documents (files, or directories of *` + flowFileSuffix + `
files, as 'flowctl export --all' writes them), matches them to the project's
flows by name, prints the plan and carries it out:

  + create NAME      no flow has the name: created, INACTIVE
  ~ update NAME      updating the flow with the file would change it (the
                     server compares, defaults filled in, secrets by value):
                     updated; the parts that differ are listed
  = unchanged NAME   nothing to do
  - delete NAME      with --prune: a flow that an earlier apply created or
                     updated, and that no file has any more

Flows made any other way are never deleted. --dry-run prints the plan only
and exits 2 when it has changes (0 when none). Applying the same files
again changes nothing.`,
		Args: positional("apply"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(paths) == 0 {
				return errors.New("-f PATH is required: flow files, or directories of " + flowFileSuffix + " files")
			}
			files, err := readFlowFiles(paths)
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			plan, err := makePlan(ctx, api, files, prune)
			if err != nil {
				return err
			}
			changes := 0
			for _, ch := range plan {
				fmt.Fprintln(c.stdout, ch)
				if ch.op != "=" {
					changes++
				}
			}
			if dryRun {
				if changes > 0 {
					return exitError{code: 2}
				}
				return nil
			}
			for _, ch := range applyOrder(plan) {
				if err := applyChange(ctx, api, ch); err != nil {
					return fmt.Errorf("%s: %w", ch, err)
				}
			}
			fmt.Fprintf(c.stdout, "applied: %d change(s), %d unchanged\n", changes, len(plan)-changes)
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&paths, "file", "f", nil, "flow file or directory (repeatable)")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete flows an earlier apply made that no file has any more")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan only; exit 2 when it has changes")
	return cmd
}

// readFlowFiles reads the documents at paths: files as given, directories'
// *.flow.json files in name order. Two documents with one name refuse.
func readFlowFiles(paths []string) ([]*flowFile, error) {
	var names []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		if !st.IsDir() {
			names = append(names, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*"+flowFileSuffix))
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		sort.Strings(matches)
		names = append(names, matches...)
	}
	var files []*flowFile
	byName := map[string]string{}
	for _, path := range names {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		var doc automation.FlowDocument
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%s: not a flow document: %w", path, err)
		}
		switch {
		case doc.APIVersion != automation.DocumentAPIVersion || doc.Kind != automation.DocumentKind:
			return nil, fmt.Errorf("%s: apiVersion %q, kind %q: want %q, %q", path, doc.APIVersion, doc.Kind, automation.DocumentAPIVersion, automation.DocumentKind)
		case strings.TrimSpace(doc.Name) == "":
			return nil, fmt.Errorf("%s: the document has no name", path)
		}
		if other, ok := byName[doc.Name]; ok {
			return nil, fmt.Errorf("%s and %s both define flow %q: apply matches flows by name, so names must be unique", other, path, doc.Name)
		}
		byName[doc.Name] = path
		files = append(files, &flowFile{path: path, doc: doc, raw: raw})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no flow documents in %s (a directory's files must end in %s)", strings.Join(paths, ", "), flowFileSuffix)
	}
	return files, nil
}

// makePlan compares the files with the project's flows.
func makePlan(ctx context.Context, api *client, files []*flowFile, prune bool) ([]change, error) {
	p, _, err := fetchList[automation.FlowSummary](ctx, api, "/api/v1/flows", url.Values{"limit": {"100"}}, true)
	if err != nil {
		return nil, err
	}
	live := map[string][]automation.FlowSummary{}
	for _, f := range p.Data {
		live[f.Name] = append(live[f.Name], f)
	}
	var plan []change
	inFiles := map[string]bool{}
	for _, f := range files {
		inFiles[f.doc.Name] = true
		matches := live[f.doc.Name]
		switch len(matches) {
		case 0:
			plan = append(plan, change{op: "+", name: f.doc.Name, file: f})
			continue
		case 1:
		default:
			return nil, duplicateNames(f.doc.Name, matches)
		}
		cur := matches[0]
		if cur.Engine != f.doc.Engine {
			return nil, fmt.Errorf("%s: flow %q (%s) is a %s flow, the file a %s one; the engine cannot change (delete the flow, or rename the file's)", f.path, cur.Name, cur.ID, cur.Engine, f.doc.Engine)
		}
		// The server compares: it fills in the defaults the file leaves out
		// as an update would, and compares secrets with the stored values,
		// which it never shows.
		var cmp automation.FlowComparison
		if _, err := api.do(ctx, http.MethodPost, "/api/v1/flows/"+url.PathEscape(cur.ID)+"/compare", nil, f.raw, &cmp); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		op := "~"
		if !cmp.Changed {
			op = "="
		}
		plan = append(plan, change{op: op, name: f.doc.Name, id: cur.ID, file: f, differences: cmp.Differences})
	}
	if prune {
		for _, f := range p.Data {
			if inFiles[f.Name] {
				continue
			}
			if f.ManagedBy != automation.ManagedByApply {
				continue // made another way: never pruned
			}
			if len(live[f.Name]) > 1 {
				return nil, duplicateNames(f.Name, live[f.Name])
			}
			plan = append(plan, change{op: "-", name: f.Name, id: f.ID})
		}
	}
	return plan, nil
}

func duplicateNames(name string, flows []automation.FlowSummary) error {
	ids := make([]string, len(flows))
	for i, f := range flows {
		ids[i] = f.ID
	}
	return fmt.Errorf("flows %s are all named %q: apply matches flows by name, so rename all but one first", strings.Join(ids, ", "), name)
}

// calledNames lists the flow names a document's CALL_FLOW steps call.
func calledNames(v any, into map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		if name, _ := t["flow"].(string); t["type"] == string(automation.StepCallFlow) && name != "" {
			into[name] = true
		}
		for _, e := range t {
			calledNames(e, into)
		}
	case []any:
		for _, e := range t {
			calledNames(e, into)
		}
	}
}

// applyOrder is the order apply carries out a plan in: creates first, a
// flow after the new flows it calls by name (the server resolves a name
// when the caller is saved, so the called flow must exist by then), then
// updates and deletes as planned. Flows that call one another in a circle
// keep file order: the first of them is refused naming its step.
func applyOrder(plan []change) []change {
	var creates, rest []change
	for _, ch := range plan {
		if ch.op == "+" {
			creates = append(creates, ch)
		} else {
			rest = append(rest, ch)
		}
	}
	pending := map[string]bool{}
	calls := map[string]map[string]bool{}
	for _, ch := range creates {
		pending[ch.name] = true
		calls[ch.name] = map[string]bool{}
		var doc any
		if json.Unmarshal(ch.file.raw, &doc) == nil {
			calledNames(doc, calls[ch.name])
		}
	}
	var ordered []change
	for len(creates) > 0 {
		var next []change
		for _, ch := range creates {
			ready := true
			for name := range calls[ch.name] {
				if name != ch.name && pending[name] {
					ready = false
				}
			}
			if ready {
				ordered = append(ordered, ch)
				delete(pending, ch.name)
			} else {
				next = append(next, ch)
			}
		}
		if len(next) == len(creates) { // a circle: file order
			ordered = append(ordered, next...)
			break
		}
		creates = next
	}
	return append(ordered, rest...)
}

// applyChange carries out one line of the plan. Creates and updates mark
// the flow as managed by apply, so that --prune may delete it later.
func applyChange(ctx context.Context, api *client, ch change) error {
	switch ch.op {
	case "+", "~":
		definition := ch.op == "+" || slices.ContainsFunc(ch.differences, func(d string) bool { return strings.HasPrefix(d, "definition.") })
		body, err := inputBody(ch.file, ch.op == "+", definition)
		if err != nil {
			return err
		}
		path := "/api/v1/flows"
		if ch.op == "~" {
			path += "/" + url.PathEscape(ch.id)
		}
		_, err = api.do(ctx, http.MethodPost, path, nil, body, nil)
		return err
	case "-":
		_, err := api.do(ctx, http.MethodDelete, "/api/v1/flows/"+url.PathEscape(ch.id), nil, nil, nil)
		return err
	}
	return nil
}

// inputBody is the create (or update) body of a document, built from the
// file's JSON rather than from decoded values: a secret field's text goes
// as it is, "********" (keep the stored value) or "{{ vars.NAME }}",
// where automation.Secret's encoding would mask every one. It is the
// update automation.DocumentInput describes, which the server's compare
// assumes: every part of the definition, a part the file leaves out as a
// new flow has it. Without definition (only the description differs) it
// carries no definition field, so that no version is published.
func inputBody(f *flowFile, create, definition bool) ([]byte, error) {
	var doc struct {
		Definition map[string]json.RawMessage `json:"definition"`
	}
	if err := json.Unmarshal(f.raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	body := map[string]any{"description": f.doc.Description, "managedBy": automation.ManagedByApply}
	if create {
		body["name"], body["engine"] = f.doc.Name, f.doc.Engine
	}
	if !definition {
		return json.Marshal(body)
	}
	// A part the file leaves out is the default (null: none), as a step
	// left out is removed.
	for k, v := range map[string]any{"trigger": json.RawMessage(`{}`), "steps": json.RawMessage(`[]`),
		"onError": json.RawMessage(`[]`), "concurrency": nil, "throttle": nil} {
		body[k] = v
	}
	for _, k := range []string{"trigger", "steps", "onError", "concurrency", "throttle"} {
		if v, ok := doc.Definition[k]; ok && string(v) != "null" {
			body[k] = v
		}
	}
	return json.Marshal(body)
}
