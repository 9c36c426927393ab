package automation

import "flowservice/pkg/flowdef"

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
)

const (
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
	StepTypes      = flowdef.StepTypes
	WebhookMethods = flowdef.WebhookMethods
	MaskJSON       = flowdef.MaskJSON
	MaskText       = flowdef.MaskText
	MaskValue      = flowdef.MaskValue
	SecretForms    = flowdef.SecretForms
	SecretMasks    = flowdef.SecretMasks
	StandardKey    = flowdef.StandardKey
	WalkSteps      = flowdef.WalkSteps
	CloneSteps     = flowdef.CloneSteps
)
