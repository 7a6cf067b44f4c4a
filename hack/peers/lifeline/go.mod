module github.com/bucketkeeper/bucketkeeper/hack/peers/lifeline

go 1.26.0
