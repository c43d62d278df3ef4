package nats

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/webhookd/webhookd/internal/failtext"
)

// Bounds of what a server sends, which the client library does not
// bound itself: it reads a control line whatever its length and makes a
// buffer of whatever size a MSG line announces.
const (
	// maxLine is the longest control line: an INFO carries the server's
	// description and a cluster's connect URLs, a few KiB.
	maxLine = 64 << 10
	// maxFrame is the largest message payload (headers included) taken
	// from the server: the only messages a publisher subscribes to are
	// JetStream's acknowledgements, about a hundred bytes.
	maxFrame = 64 << 10
)

// frameScanner follows the NATS protocol a server sends, byte by byte as
// it is read, and fails a line or a message past its bound before the
// client library reads it. It keeps the first line when it is an INFO,
// for the TLS upgrade.
type frameScanner struct {
	// line is the control line read so far, at most maxLine bytes.
	line []byte
	// skip is how many bytes of a message's payload (and its CRLF) are
	// still to pass.
	skip int
	// info is the first INFO line's JSON, once read; infoDone says that
	// the first line was read (an INFO or not).
	info     []byte
	infoDone bool
}

// scan follows p. It returns the index just past the first line's end
// when p holds it (else -1), for a caller that must act between the INFO
// and what follows.
func (s *frameScanner) scan(p []byte) (firstEnd int, err error) {
	firstEnd = -1
	for i := 0; i < len(p); {
		if s.skip > 0 {
			n := min(s.skip, len(p)-i)
			s.skip -= n
			i += n
			continue
		}
		end := bytes.IndexByte(p[i:], '\n')
		if end < 0 {
			if len(s.line)+len(p)-i > maxLine {
				return firstEnd, &failtext.TooLargeError{Limit: maxLine}
			}
			s.line = append(s.line, p[i:]...)
			return firstEnd, nil
		}
		if len(s.line)+end > maxLine {
			return firstEnd, &failtext.TooLargeError{Limit: maxLine}
		}
		s.line = append(s.line, p[i:i+end]...)
		i += end + 1
		if err := s.endLine(); err != nil {
			return firstEnd, err
		}
		if !s.infoDone {
			s.infoDone = true
			firstEnd = i
			if rest, ok := bytes.CutPrefix(bytes.TrimSpace(s.line), []byte("INFO ")); ok {
				s.info = bytes.Clone(rest)
			}
		}
		s.line = s.line[:0]
	}
	return firstEnd, nil
}

// endLine reads a whole control line: a MSG or HMSG announces its
// payload's size, last on its line, which must be within maxFrame.
func (s *frameScanner) endLine() error {
	args := bytes.Fields(s.line)
	if len(args) == 0 {
		return nil
	}
	op := string(bytes.ToUpper(args[0]))
	if op != "MSG" && op != "HMSG" {
		return nil
	}
	size, err := strconv.Atoi(string(args[len(args)-1]))
	switch {
	case err != nil || size < 0 || len(args) < 4:
		return fmt.Errorf("nats: a malformed %s line from the server", op)
	case size > maxFrame:
		return &failtext.TooLargeError{Limit: maxFrame}
	}
	s.skip = size + 2 // the payload's CRLF
	return nil
}
