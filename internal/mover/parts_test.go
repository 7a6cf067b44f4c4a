package mover

import "testing"

func TestLayoutParts(t *testing.T) {
	l := layout{size: 20<<20 + 3, partSize: 8 << 20}
	if l.count() != 3 {
		t.Fatalf("count %d, want 3", l.count())
	}
	var total int64
	for i := range l.count() {
		off, n := l.part(i)
		if off != total {
			t.Errorf("part %d at %d, want %d", i, off, total)
		}
		total += n
	}
	if total != l.size {
		t.Errorf("parts sum to %d, want %d", total, l.size)
	}
	x := layout{size: 12, partSize: 5, sizes: []int64{5, 6, 1}}
	if off, n := x.part(2); off != 11 || n != 1 || x.count() != 3 {
		t.Errorf("explicit layout part 2 = %d+%d of %d parts", off, n, x.count())
	}
}

func TestOwnLayoutStaysWithinTenThousandParts(t *testing.T) {
	s := &shard{limits: Limits{PartSize: 16 << 20}}
	l := s.ownLayout(5 << 40) // 5 TiB, S3's largest object
	if l.count() > maxParts {
		t.Fatalf("%d parts of %d bytes", l.count(), l.partSize)
	}
	if l.partSize%(1<<20) != 0 {
		t.Errorf("part size %d is not whole MiB", l.partSize)
	}
}

func TestPartsOfAndContentMD5(t *testing.T) {
	for etag, want := range map[string]int{"d41d8cd98f00b204e9800998ecf8427e": 0, "abc-12": 12, "abc-x": 0, "abc-0": 0, "": 0} {
		if got := partsOf(etag); got != want {
			t.Errorf("partsOf(%q) = %d, want %d", etag, got, want)
		}
	}
	if got := contentMD5("d41d8cd98f00b204e9800998ecf8427e"); got != "1B2M2Y8AsgTpgAmY7PhCfg==" {
		t.Errorf("contentMD5 of the empty MD5 = %q", got)
	}
	if contentMD5("abc-12") != "" || contentMD5("zz1d8cd98f00b204e9800998ecf8427e") != "" {
		t.Error("contentMD5 of a non-MD5 ETag")
	}
}
