// Package samenv writes the file `sam local invoke --env-vars` reads: each
// function's environment as template.yaml declares it, with the intrinsic
// functions resolved. SAM's local invoke resolves a !Ref to a resource as
// its logical ID ("ProjectsTable"), so without this file a function starts
// with table names and queue URLs that do not exist.
//
// Values come from a deployed stack's outputs (FromStack, given what
// `aws cloudformation describe-stacks` prints) or from resources made on
// moto_server by awsdev.Provision (FromConfig). cmd: `go run ./deploy/samenv`.
package samenv

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"flowservice/pkg/awsapp"
)

// Values resolve a template's intrinsics: Params by parameter or pseudo
// parameter name (Stage, AWS::Region), Refs by "<LogicalId>" for a !Ref
// and "<LogicalId>.<Attribute>" for a !GetAtt.
type Values struct {
	Params map[string]string
	Refs   map[string]string
}

func (v Values) lookup(name string) (string, error) {
	if s, ok := v.Params[name]; ok {
		return s, nil
	}
	if s, ok := v.Refs[name]; ok {
		return s, nil
	}
	return "", fmt.Errorf("samenv: no value for %s", name)
}

// Template is the part of template.yaml the env file needs.
type Template struct {
	Globals struct {
		Function struct {
			MemorySize  int `yaml:"MemorySize"`
			Timeout     int `yaml:"Timeout"`
			Environment struct {
				Variables map[string]yaml.Node `yaml:"Variables"`
			} `yaml:"Environment"`
		} `yaml:"Function"`
	} `yaml:"Globals"`
	Parameters map[string]struct {
		Default yaml.Node `yaml:"Default"`
	} `yaml:"Parameters"`
	Resources map[string]struct {
		Type       string `yaml:"Type"`
		Properties struct {
			MemorySize  int `yaml:"MemorySize"`
			Timeout     int `yaml:"Timeout"`
			Environment struct {
				Variables map[string]yaml.Node `yaml:"Variables"`
			} `yaml:"Environment"`
		} `yaml:"Properties"`
	} `yaml:"Resources"`
	Outputs map[string]struct {
		Value yaml.Node `yaml:"Value"`
	} `yaml:"Outputs"`
}

// Parse reads a SAM template.
func Parse(src []byte) (*Template, error) {
	var t Template
	if err := yaml.Unmarshal(src, &t); err != nil {
		return nil, fmt.Errorf("samenv: template: %w", err)
	}
	return &t, nil
}

// Functions lists the template's functions by logical ID.
func (t *Template) Functions() []string {
	var fns []string
	for id, r := range t.Resources {
		if r.Type == "AWS::Serverless::Function" {
			fns = append(fns, id)
		}
	}
	slices.Sort(fns)
	return fns
}

// Settings returns a function's memory (MB) and timeout (seconds): its
// own, else the Globals', else Lambda's defaults (128 MB, 3 s).
func (t *Template) Settings(fn string) (memory, timeout int) {
	memory, timeout = 128, 3
	g, p := t.Globals.Function, t.Resources[fn].Properties
	for _, m := range []int{g.MemorySize, p.MemorySize} {
		if m != 0 {
			memory = m
		}
	}
	for _, s := range []int{g.Timeout, p.Timeout} {
		if s != 0 {
			timeout = s
		}
	}
	return memory, timeout
}

// Env returns each function's variables, Globals first and the function's
// own on top, resolved with v. extra (such as AWS_ENDPOINT_URL for a local
// emulator) overrides them in every function; a variable of extra that the
// template does not declare is an error, since `sam local invoke
// --env-vars` sets only declared variables and would silently drop it
// (aws-sam-cli #1553): without AWS_ENDPOINT_URL, the function would call
// real AWS.
func (t *Template) Env(v Values, extra map[string]string) (map[string]map[string]string, error) {
	env := map[string]map[string]string{}
	for _, fn := range t.Functions() {
		vars := map[string]string{}
		nodes := maps.Clone(t.Globals.Function.Environment.Variables)
		if nodes == nil {
			nodes = map[string]yaml.Node{}
		}
		maps.Copy(nodes, t.Resources[fn].Properties.Environment.Variables)
		for name, n := range nodes {
			s, err := eval(&n, v)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", fn, name, err)
			}
			vars[name] = s
		}
		for k, v := range extra {
			if _, ok := vars[k]; !ok {
				return nil, fmt.Errorf("samenv: %s does not declare %s: sam local invoke --env-vars would not set it (declare it in template.yaml, empty)", fn, k)
			}
			vars[k] = v
		}
		env[fn] = vars
	}
	return env, nil
}

var subVar = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// eval resolves the intrinsics an environment variable may use: !Ref,
// !GetAtt, !Sub and !Join over a list.
func eval(n *yaml.Node, v Values) (string, error) {
	switch n.Tag {
	case "!Ref":
		return v.lookup(n.Value)
	case "!GetAtt":
		return v.lookup(n.Value)
	case "!Sub":
		var err error
		out := subVar.ReplaceAllStringFunc(n.Value, func(m string) string {
			s, e := v.lookup(m[2 : len(m)-1])
			if e != nil && err == nil {
				err = e
			}
			return s
		})
		return out, err
	case "!Join":
		if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
			return "", fmt.Errorf("samenv: !Join wants [separator, list]")
		}
		sep := n.Content[0].Value
		list := n.Content[1]
		if list.Tag == "!Ref" {
			// A CommaDelimitedList parameter.
			s, err := v.lookup(list.Value)
			return strings.Join(strings.Split(s, ","), sep), err
		}
		var parts []string
		for _, c := range list.Content {
			s, err := eval(c, v)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, sep), nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("samenv: line %d: unsupported value (tag %s)", n.Line, n.Tag)
	}
	return n.Value, nil
}

// Pseudo returns the pseudo parameters of a region and account.
func Pseudo(region, account, partition string) map[string]string {
	suffix := "amazonaws.com"
	if partition == "aws-cn" {
		suffix = "amazonaws.com.cn"
	}
	return map[string]string{"AWS::Region": region, "AWS::AccountId": account, "AWS::Partition": partition, "AWS::URLSuffix": suffix}
}

// Stack is what `aws cloudformation describe-stacks --stack-name NAME`
// prints.
type Stack struct {
	Stacks []struct {
		StackID    string `json:"StackId"`
		Parameters []struct {
			Key   string `json:"ParameterKey"`
			Value string `json:"ParameterValue"`
		} `json:"Parameters"`
		Outputs []struct {
			Key   string `json:"OutputKey"`
			Value string `json:"OutputValue"`
		} `json:"Outputs"`
	} `json:"Stacks"`
}

// FromStack reads the values of a deployed stack: its parameters, its
// outputs (the template exports "<LogicalId>" for each resource a function
// refers to, "<LogicalId>Arn" for its ARN) and the region and account of
// its ID.
func (t *Template) FromStack(describe []byte) (Values, error) {
	var st Stack
	if err := json.Unmarshal(describe, &st); err != nil || len(st.Stacks) != 1 {
		return Values{}, fmt.Errorf("samenv: want the output of describe-stacks for one stack (%v)", err)
	}
	s := st.Stacks[0]
	// arn:aws:cloudformation:us-east-1:123456789012:stack/name/id
	arn := strings.Split(s.StackID, ":")
	if len(arn) < 6 {
		return Values{}, fmt.Errorf("samenv: stack ID %q is not an ARN", s.StackID)
	}
	v := Values{Params: Pseudo(arn[3], arn[4], arn[1]), Refs: map[string]string{}}
	for name, p := range t.Parameters {
		v.Params[name] = p.Default.Value
	}
	for _, p := range s.Parameters {
		v.Params[p.Key] = p.Value
	}
	for _, o := range s.Outputs {
		v.Refs[o.Key] = o.Value
		if id, ok := strings.CutSuffix(o.Key, "Arn"); ok {
			v.Refs[id+".Arn"] = o.Value
		}
	}
	return v, nil
}

// FromConfig gives the names of resources made outside CloudFormation (on
// moto_server, by awsdev.Provision) for a stage and the emulator's region
// and account. Other parameters take their defaults. There are no REST
// APIs: their IDs are made up from the stage, so that the receivers' URLs
// in webhook descriptors are well formed.
func (t *Template) FromConfig(cfg awsapp.Config, stage, region, account string) Values {
	v := Values{Params: Pseudo(region, account, "aws"), Refs: map[string]string{
		"ProjectsTable": cfg.Tables.Projects, "KeysTable": cfg.Tables.Keys, "FlowsTable": cfg.Tables.Flows,
		"RoutesTable": cfg.Tables.Routes, "ConnectionsTable": cfg.Tables.Connections, "RunsTable": cfg.Tables.Runs,
		"SamplesTable": cfg.Tables.Samples, "OAuthAppsTable": cfg.Tables.OAuthApps, "AuditTable": cfg.Tables.Audit,
		"AlertsTable": cfg.Tables.Alerts,
		"RunQueue":    cfg.QueueURL, "RunQueue.Arn": cfg.QueueARN,
		// Provision names the DLQ after the queue, as the template does.
		"RunDeadLetterQueue": cfg.QueueURL + "-dlq", "RunDeadLetterQueue.Arn": cfg.ScheduleDeadLetterARN,
		"PayloadBucket": cfg.PayloadBucket, "CursorKeySecret": cfg.CursorKeySecretARN,
		"ScheduleGroup": cfg.ScheduleGroup, "SchedulerRole.Arn": cfg.SchedulerRoleARN,
		"ManagementApi": stage + "0management", "EngineApi": stage + "0engine", "WorkflowApi": stage + "0workflow",
		// No function runs on moto: CODE steps invoked locally fail as the
		// code function not found, under the name a stack would give it.
		"CodeFunction": "flow-" + stage + "-code",
	}}
	for name, p := range t.Parameters {
		v.Params[name] = p.Default.Value
	}
	v.Params["Stage"] = stage
	return v
}

// EvalOutputs evaluates the template's Outputs with v: what describe-stacks
// would list for a stack whose resources v names.
func (t *Template) EvalOutputs(v Values) (map[string]string, error) {
	out := map[string]string{}
	for k, o := range t.Outputs {
		s, err := eval(&o.Value, v)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", k, err)
		}
		out[k] = s
	}
	return out, nil
}
