module github.com/bucketkeeper/bucketkeeper/test/manifests

go 1.26.0

require github.com/bucketkeeper/bucketkeeper v0.0.0

replace github.com/bucketkeeper/bucketkeeper => ../..
