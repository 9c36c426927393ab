package automation

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// maxReplayToken bounds ReplayRequest.ReplayToken.
const maxReplayToken = 128

// checkReplayToken refuses a token that is too long or not printable
// ASCII: it is hashed into IDs and may be logged.
func checkReplayToken(tok string) error {
	if len(tok) > maxReplayToken {
		return InvalidCode("INVALID_PARAMETER", "replayToken must be at most %d characters, got %d", maxReplayToken, len(tok))
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return InvalidCode("INVALID_PARAMETER", "replayToken must be printable ASCII without spaces")
		}
	}
	return nil
}

// replayRunID is the ID of the run a replay with token makes from the run
// old: the same on every retry of that replay, so that a client retrying
// after a timeout (API Gateway's 504 at 29 s) meets RUN_EXISTS for each run
// the first attempt made instead of making it twice. The form is
// NewRunID's: the time part is old's creation (the IDs of one replay stay
// neighbours, as a burst's do), then replayMark(token) (40 bits), then 56
// bits of SHA-256 over the token and old's ID.
func replayRunID(token string, old Run) string {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(old.Created.UnixMilli())<<14)
	mark := sha256.Sum256([]byte("replay\x00" + token))
	sum := sha256.Sum256([]byte("replay\x00" + token + "\x00" + old.ID))
	return PrefixRun + timeEncoding.EncodeToString(ms[:])[:10] + idEncoding.EncodeToString(append(mark[:5:5], sum[:7]...))
}

// madeByReplay tells a run that a replay with token made: a retry of the
// replay must not take the runs its first try made, since failed, for runs
// to replay.
func madeByReplay(token, id string) bool {
	mark := sha256.Sum256([]byte("replay\x00" + token))
	n := len(PrefixRun) + 10
	return len(id) >= n+8 && id[n:n+8] == idEncoding.EncodeToString(mark[:5])
}

// isRunExists tells the store's refusal of a run ID that exists already.
func isRunExists(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeRunExists
}
