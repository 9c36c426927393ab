package httpapi

import (
	"errors"
	"strconv"

	"flowservice/pkg/automation"
)

// checkNumbers refuses a JSON body holding a number a float64 cannot hold
// (1e999999), with a 400 INVALID_JSON, before it is stored: steps read
// numbers as float64, and such a number reached them as a raw string,
// silently. Like jsonDepthExceeds it scans the bytes once without building
// any value; only numbers with an exponent or more than 15 characters are
// parsed, the only ones that can be out of range.
func checkNumbers(b []byte) error {
	var str jsonStrings
	for i := 0; i < len(b); i++ {
		c := b[i]
		if str.skip(c) || c != '-' && (c < '0' || c > '9') {
			continue
		}
		j, exp := i, false
		for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] >= '0' && b[j] <= '9') {
			exp = exp || b[j] == 'e' || b[j] == 'E'
			j++
		}
		if exp || j-i > 15 {
			if _, err := strconv.ParseFloat(string(b[i:j]), 64); errors.Is(err, strconv.ErrRange) {
				return automation.InvalidCode("INVALID_JSON",
					"the webhook body holds the number %s, out of the range of a 64-bit float (about ±1.8e308)", clipNumber(b[i:j]))
			}
		}
		i = j - 1
	}
	return nil
}

// clipNumber quotes at most 40 characters of a number.
func clipNumber(n []byte) string {
	if len(n) > 40 {
		return string(n[:40]) + "…"
	}
	return string(n)
}
