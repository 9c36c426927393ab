module flowservice

go 1.26

require (
	github.com/aws/aws-sdk-go-v2 v1.47.7
	github.com/aws/aws-sdk-go-v2/credentials v1.20.15
)

require github.com/aws/smithy-go v1.28.8 // indirect
