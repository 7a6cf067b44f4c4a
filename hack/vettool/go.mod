// Module vettool is go vet's analyzer suite at the golang.org/x/tools version the Go
// toolchain vendors for cmd/vet: its unitchecker type-checks against the compiler's export
// data, so a dependency's facts can be skipped (newer ones read each dependency's types
// from the facts files, which every dependency must then write).
module github.com/bucketkeeper/bucketkeeper/hack/vettool

go 1.26.6

require golang.org/x/tools v0.39.1-0.20260527181557-0f52e3809b35
