package awsapp

import (
	"context"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The adapters take small interfaces over the SDK clients. The functions
// pass them these concrete forwarders instead of the clients themselves,
// for the size of the bootstraps: the expression engine calls methods by
// name through reflection, and once a binary does that, the linker keeps
// every exported method of every type that is ever stored in an interface.
// An SDK client in an interface, or in a struct that is, would bring all of
// its service's operations. The forwarders hold method values, not the
// client, so only the calls made here are linked. (S3's client cannot be
// kept out of an interface: s3payloads.Client replaces it.)
// deploy's TestBinarySizes keeps the result in check.

type dynamoClient struct {
	getItem            func(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	putItem            func(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	updateItem         func(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	deleteItem         func(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	query              func(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	scan               func(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	transactWriteItems func(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	batchWriteItem     func(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	batchGetItem       func(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

func newDynamoClient(c *dynamodb.Client) dynamoClient {
	return dynamoClient{getItem: c.GetItem, putItem: c.PutItem, updateItem: c.UpdateItem, deleteItem: c.DeleteItem, query: c.Query, scan: c.Scan, transactWriteItems: c.TransactWriteItems, batchWriteItem: c.BatchWriteItem, batchGetItem: c.BatchGetItem}
}

func (x dynamoClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return x.getItem(ctx, in, opts...)
}

func (x dynamoClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return x.putItem(ctx, in, opts...)
}

func (x dynamoClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return x.updateItem(ctx, in, opts...)
}

func (x dynamoClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return x.deleteItem(ctx, in, opts...)
}

func (x dynamoClient) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return x.query(ctx, in, opts...)
}

func (x dynamoClient) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return x.scan(ctx, in, opts...)
}

func (x dynamoClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return x.transactWriteItems(ctx, in, opts...)
}

func (x dynamoClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return x.batchWriteItem(ctx, in, opts...)
}

func (x dynamoClient) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return x.batchGetItem(ctx, in, opts...)
}

type sqsClient struct {
	sendMessage             func(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	changeMessageVisibility func(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

func newSqsClient(c *sqs.Client) sqsClient {
	return sqsClient{sendMessage: c.SendMessage, changeMessageVisibility: c.ChangeMessageVisibility}
}

func (x sqsClient) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return x.changeMessageVisibility(ctx, in, opts...)
}

func (x sqsClient) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return x.sendMessage(ctx, in, opts...)
}

type secretsClient struct {
	createSecret   func(context.Context, *secretsmanager.CreateSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	putSecretValue func(context.Context, *secretsmanager.PutSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
	getSecretValue func(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	deleteSecret   func(context.Context, *secretsmanager.DeleteSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
	updateStage    func(context.Context, *secretsmanager.UpdateSecretVersionStageInput, ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error)
}

func newSecretsClient(c *secretsmanager.Client) secretsClient {
	return secretsClient{createSecret: c.CreateSecret, putSecretValue: c.PutSecretValue, getSecretValue: c.GetSecretValue, deleteSecret: c.DeleteSecret,
		updateStage: c.UpdateSecretVersionStage}
}

func (x secretsClient) CreateSecret(ctx context.Context, in *secretsmanager.CreateSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error) {
	return x.createSecret(ctx, in, opts...)
}

func (x secretsClient) PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	return x.putSecretValue(ctx, in, opts...)
}

func (x secretsClient) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	return x.getSecretValue(ctx, in, opts...)
}

func (x secretsClient) DeleteSecret(ctx context.Context, in *secretsmanager.DeleteSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error) {
	return x.deleteSecret(ctx, in, opts...)
}

// observeCalls is an SDK middleware that reports each call's service,
// operation and input before it is sent.
func observeCalls(observe func(service, operation string, input any)) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("ObserveCalls",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				observe(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters)
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

func (x secretsClient) UpdateSecretVersionStage(ctx context.Context, in *secretsmanager.UpdateSecretVersionStageInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error) {
	return x.updateStage(ctx, in, opts...)
}
