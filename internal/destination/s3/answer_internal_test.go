package s3

import "testing"

// TestAnswerShowsOnlyWhatHasTheShape: a key or an ETag that a server
// (a compatible one, the merchant's) sends in another shape is left out
// of the attempt's answer, never shown.
func TestAnswerShowsOnlyWhatHasTheShape(t *testing.T) {
	for _, tc := range []struct{ key, etag, want string }{
		{"a/b.json", `"d41d8cd98f00b204e9800998ecf8427e"`, "stored by S3 (key a/b.json, ETag d41d8cd98f00b204e9800998ecf8427e)"},
		{"a/b.json", `"9b2cf535f27731c974343645a3985328-2"`, "stored by S3 (key a/b.json, ETag 9b2cf535f27731c974343645a3985328-2)"},
		{"a/b.json", `"<script>alert(1)</script>"`, "stored by S3 (key a/b.json)"},
		{"a/b.json", "", "stored by S3 (key a/b.json)"},
		{"a b", "", "stored by S3"},
	} {
		if got := answer(tc.key, tc.etag); got != tc.want {
			t.Errorf("answer(%q, %q) = %q, want %q", tc.key, tc.etag, got, tc.want)
		}
	}
}
