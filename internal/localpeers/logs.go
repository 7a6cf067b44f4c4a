package localpeers

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// LogSince returns what a log file holds from offset off on, at most 1 MiB: a
// process's start, which comes first, fits well within it.
func LogSince(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<20))
	return string(b)
}

// LogTail returns the last lines of a log file, for error messages.
func LogTail(path string) string {
	const maxBytes = 6 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(st.Size()-maxBytes, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	b = b[:n]
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
