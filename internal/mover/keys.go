package mover

import (
	"fmt"
	"strings"
)

// Object keys travel in the request's path, as the source listed them, and S3 lets a
// key hold anything: "a/../b", "a/./b", "a//b", "/a", "a/.", "a\\b". Stores that keep
// objects as files take such a key for a path: Versity S3 Gateway writes "a/../b" as
// "b", "a//b" as "a/b" and "/a" as "a"; SeaweedFS refuses "." and ".." segments and
// writes "a//b" and "a\\b" as "a/b"; Ceph RGW keeps them all as they are. A key written
// under another key would overwrite another object, or in a bucket with object lock
// leave a locked version nobody asked for, and no request that carries the key in its
// path can tell beforehand which the target does (escaping the dots breaks the
// signature on RGW and Versity). So the mover copies none of them: such a key fails,
// named, and the move does not cut over until it is renamed or deleted on the source.
// Keys with "%2F", or dots within a segment ("a/..b"), stay keys on every store tested
// and are copied under the same name.

// pathKeyProblem says why key cannot be copied safely, "" when it can: a "." or ".."
// segment, an empty one (a leading "/" or "//"), or a backslash.
func pathKeyProblem(key string) string {
	if strings.Contains(key, "\\") {
		return "a backslash, which SeaweedFS reads as \"/\""
	}
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return fmt.Sprintf("a %q path segment", seg)
		case seg == "" && i < len(segs)-1:
			// A key may end in "/" (a folder marker); anywhere else an empty segment
			// is a leading "/" or a "//".
			return "an empty path segment (a leading \"/\" or \"//\")"
		}
	}
	return ""
}

// unsafeKey is the failure of a key the mover does not copy.
type unsafeKey struct{ key, problem string }

func (e *unsafeKey) Error() string {
	return fmt.Sprintf("key %s has %s, which stores keeping objects as files write under another key: not copied; rename it on the source", quoteKey(e.key), e.problem)
}

// checkKey refuses a key the mover does not copy (keys.go).
func checkKey(key string) error {
	if p := pathKeyProblem(key); p != "" {
		return &unsafeKey{key: key, problem: p}
	}
	return nil
}
