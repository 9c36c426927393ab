package pgstore

import "flowservice/pkg/rundoc"

// A run is stored as its JSON document and the summary lists read, cut
// from it without decoding (pkg/rundoc, shared by every SQL store).
var (
	encodeRunAndSummary = rundoc.EncodeRunAndSummary
	objectMember        = rundoc.ObjectMember
)
