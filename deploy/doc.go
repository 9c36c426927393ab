// Package deploy holds the tests of the AWS deployment: the SAM template as
// CloudFormation will see it after the transform, the Lambda handlers driven
// by the sample events in events/, a real bootstrap binary against a local
// Lambda Runtime API, and the size of the Lambda binaries. It has no code of
// its own; pkg/awsapp is what the functions run.
package deploy
