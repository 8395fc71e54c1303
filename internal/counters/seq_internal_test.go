package counters

import "testing"

// A checkpoint written before guards kept the sequence number as given
// comes back in the stream's own form, for AWS's numbers (no leading
// zeros, 21 to 40 digits) and DynamoDB Local's (zero-padded to 21).
func TestUnpadSeq(t *testing.T) {
	for _, seq := range []string{
		"000000000000000000199",                    // DynamoDB Local
		"000000000000000000001",                    // DynamoDB Local, its first record
		"100000000000000000001",                    // AWS, 21 digits
		"4421584500000000017450439091",             // AWS, 28 digits
		"9999999999999999999999999999999999999999", // AWS, 40 digits
	} {
		if got := unpadSeq(PadSeq(seq)); got != seq {
			t.Errorf("unpadSeq(PadSeq(%q)) = %q", seq, got)
		}
	}
	if got := unpadSeq(""); got != "" {
		t.Errorf("no checkpoint unpadded to %q", got)
	}
}
