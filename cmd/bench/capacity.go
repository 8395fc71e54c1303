package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// askCapacity returns a DynamoDB input that asks for ReturnConsumedCapacity
// INDEXES (the table's units and each index's) when params leaves it unset.
// It copies the input rather than changing the caller's: the store's own
// inputs are left exactly as the store built them. Other inputs come back
// as they are.
func askCapacity(params any) any {
	const want = ddbtypes.ReturnConsumedCapacityIndexes
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.UpdateItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.DeleteItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.GetItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.QueryInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.ScanInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.BatchGetItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.BatchWriteItemInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.TransactWriteItemsInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	case *dynamodb.TransactGetItemsInput:
		if in.ReturnConsumedCapacity == "" {
			cp := *in
			cp.ReturnConsumedCapacity = want
			return &cp
		}
	}
	return params
}

// capReport is the capacity DynamoDB reported for one call.
type capReport struct {
	Write      float64 // write units, table and indexes
	WriteIndex float64 // of which on global secondary indexes
	Read       float64 // read units, table and indexes
}

// consumed reads the ConsumedCapacity a DynamoDB output carries; ok is
// false when it carries none (other services, calls that did not ask, an
// emulator that does not answer). A report's CapacityUnits are read units
// for reads and write units for writes; when DynamoDB splits them
// (ReadCapacityUnits, WriteCapacityUnits: provisioned tables, transactions
// with condition checks) the split is used.
func consumed(result any) (capReport, bool) {
	var ccs []ddbtypes.ConsumedCapacity
	one := func(cc *ddbtypes.ConsumedCapacity) {
		if cc != nil {
			ccs = append(ccs, *cc)
		}
	}
	write := true
	switch out := result.(type) {
	case *dynamodb.PutItemOutput:
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.UpdateItemOutput:
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.DeleteItemOutput:
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.BatchWriteItemOutput:
		if out != nil {
			ccs = out.ConsumedCapacity
		}
	case *dynamodb.TransactWriteItemsOutput:
		if out != nil {
			ccs = out.ConsumedCapacity
		}
	case *dynamodb.GetItemOutput:
		write = false
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.QueryOutput:
		write = false
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.ScanOutput:
		write = false
		if out != nil {
			one(out.ConsumedCapacity)
		}
	case *dynamodb.BatchGetItemOutput:
		write = false
		if out != nil {
			ccs = out.ConsumedCapacity
		}
	case *dynamodb.TransactGetItemsOutput:
		write = false
		if out != nil {
			ccs = out.ConsumedCapacity
		}
	default:
		return capReport{}, false
	}
	if len(ccs) == 0 {
		return capReport{}, false
	}
	var r capReport
	for _, cc := range ccs {
		total := aws.ToFloat64(cc.CapacityUnits)
		idx := 0.0
		for _, g := range cc.GlobalSecondaryIndexes {
			idx += aws.ToFloat64(g.CapacityUnits)
		}
		switch {
		case cc.ReadCapacityUnits != nil || cc.WriteCapacityUnits != nil:
			r.Read += aws.ToFloat64(cc.ReadCapacityUnits)
			r.Write += aws.ToFloat64(cc.WriteCapacityUnits)
			if write {
				r.WriteIndex += idx
			}
		case write:
			r.Write += total
			r.WriteIndex += idx
		default:
			r.Read += total
		}
	}
	return r, true
}
