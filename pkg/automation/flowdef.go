package automation

import (
	"fmt"
	"strings"
	"time"

	"flowservice/pkg/flowdef"
)

// The flow language lives in pkg/flowdef (the definition types and their
// save-time rules, standard library only). These names keep the domain's
// own code, and the adapters written against it, reading as before; new
// code names flowdef directly.

type (
	AuthType       = flowdef.AuthType
	Authentication = flowdef.Authentication
	Case           = flowdef.Case
	Concurrency    = flowdef.Concurrency
	Engine         = flowdef.Engine
	Paginate       = flowdef.Paginate
	Poll           = flowdef.Poll
	PollRequest    = flowdef.PollRequest
	Query          = flowdef.Query
	ResponseMode   = flowdef.ResponseMode
	Schedule       = flowdef.Schedule
	Secret         = flowdef.Secret
	Signature      = flowdef.Signature
	Step           = flowdef.Step
	StepRetry      = flowdef.StepRetry
	StepType       = flowdef.StepType
	Throttle       = flowdef.Throttle
	Trigger        = flowdef.Trigger
	TriggerType    = flowdef.TriggerType
	Webhook        = flowdef.Webhook
	Schema         = flowdef.Schema
)

const (
	MaxAllowedHosts       = flowdef.MaxAllowedHosts
	SignatureTolerance    = flowdef.SignatureTolerance
	AuthBasic             = flowdef.AuthBasic
	AuthHeader            = flowdef.AuthHeader
	AuthNone              = flowdef.AuthNone
	CodeMemoryBytes       = flowdef.CodeMemoryBytes
	DefaultCodeTimeout    = flowdef.DefaultCodeTimeout
	DefaultMaxPages       = flowdef.DefaultMaxPages
	DefaultStepBackoff    = flowdef.DefaultStepBackoff
	DefaultStepMaxBackoff = flowdef.DefaultStepMaxBackoff
	FlowBuilder           = flowdef.FlowBuilder
	MaxCodeBytes          = flowdef.MaxCodeBytes
	MaxCodeOutputBytes    = flowdef.MaxCodeOutputBytes
	MaxCodeTimeout        = flowdef.MaxCodeTimeout
	MaxFlowLimit          = flowdef.MaxFlowLimit
	MaxForEachConcurrency = flowdef.MaxForEachConcurrency
	MaxForEachItems       = flowdef.MaxForEachItems
	MaxNesting            = flowdef.MaxNesting
	MaxPages              = flowdef.MaxPages
	MaxPollEvery          = flowdef.MaxPollEvery
	MaxStateBytes         = flowdef.MaxStateBytes
	MaxStepAttempts       = flowdef.MaxStepAttempts
	MaxStepBackoff        = flowdef.MaxStepBackoff
	MaxStepTimeoutMs      = flowdef.MaxStepTimeoutMs
	MaxSteps              = flowdef.MaxSteps
	MaxThrottlePeriod     = flowdef.MaxThrottlePeriod
	MaxWait               = flowdef.MaxWait
	MethodAny             = flowdef.MethodAny
	MinPollEvery          = flowdef.MinPollEvery
	MinStepBackoff        = flowdef.MinStepBackoff
	MinThrottlePeriod     = flowdef.MinThrottlePeriod
	PresetGitHub          = flowdef.PresetGitHub
	PresetSlack           = flowdef.PresetSlack
	PresetStripe          = flowdef.PresetStripe
	RespondImmediately    = flowdef.RespondImmediately
	RespondOnCompletion   = flowdef.RespondOnCompletion
	StepCallFlow          = flowdef.StepCallFlow
	StepCode              = flowdef.StepCode
	StepFilter            = flowdef.StepFilter
	StepForEach           = flowdef.StepForEach
	StepHTTP              = flowdef.StepHTTP
	StepRespond           = flowdef.StepRespond
	StepSet               = flowdef.StepSet
	StepStore             = flowdef.StepStore
	StepSwitch            = flowdef.StepSwitch
	StepVerifySignature   = flowdef.StepVerifySignature
	StepWait              = flowdef.StepWait
	StepApproval          = flowdef.StepApproval
	TriggerSchedule       = flowdef.TriggerSchedule
	TriggerWebhook        = flowdef.TriggerWebhook
	WorkflowBuilder       = flowdef.WorkflowBuilder
	MinMaskedSecret       = flowdef.MinMaskedSecret
	PresetStandard        = flowdef.PresetStandard
	SecretMask            = flowdef.SecretMask
	StandardSecretPrefix  = flowdef.StandardSecretPrefix
	TriggerPoll           = flowdef.TriggerPoll
)

var (
	HostAllowed       = flowdef.HostAllowed
	SignHeaders       = flowdef.SignHeaders
	StandardSignature = flowdef.StandardSignature
	InferSchema       = flowdef.InferSchema
	StepTypes         = flowdef.StepTypes
	WebhookMethods    = flowdef.WebhookMethods
	MaskJSON          = flowdef.MaskJSON
	MaskText          = flowdef.MaskText
	MaskValue         = flowdef.MaskValue
	SecretForms       = flowdef.SecretForms
	SecretMasks       = flowdef.SecretMasks
	StandardKey       = flowdef.StandardKey
	WalkSteps         = flowdef.WalkSteps
	CloneSteps        = flowdef.CloneSteps
)

// VerifySignature checks an HMAC-SHA256 signature of the raw body
// (flowdef.VerifySignature): every failure is the same 401, so that a
// caller learns nothing about which part was wrong.
func VerifySignature(sig Signature, header func(name string) string, body []byte, now time.Time) error {
	if flowdef.VerifySignature(sig, header, body, now) != nil {
		return Unauthorized("INVALID_SIGNATURE", "Invalid webhook signature")
	}
	return nil
}

// ParseAllowedHosts checks a connection's allowedHosts (flowdef's rule); a
// bad pattern is a 400 naming the entry.
func ParseAllowedHosts(field string, hosts []string) ([]string, error) {
	out, err := flowdef.ParseAllowedHosts(field, hosts)
	return out, fromDef(err)
}

// CheckSendHost refuses a host that no allowedHosts fence can be trusted
// to judge (flowdef's rule), as a 400.
func CheckSendHost(host string) error { return fromDef(flowdef.CheckSendHost(host)) }

// HostRefused is the step error of a send a connection's allowedHosts
// refuse: it names the connection, its hosts and the refused host.
func HostRefused(c Connection, host string) string {
	return fmt.Sprintf("connection %s (%s) may only be sent to %s: refused to send it to %s",
		c.ID, c.Name, strings.Join(c.AllowedHosts, ", "), host)
}
