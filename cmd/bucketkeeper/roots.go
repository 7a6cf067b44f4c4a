package main

// The release image holds this binary and its licence notices, nothing else: no CA
// bundle. The operator and its movers still verify public endpoints (AWS S3, IAM and
// STS, a store behind a public CA) with Mozilla's roots, which this package compiles
// in and hands to crypto/x509 as its fallback: they are used only where the system
// has no roots of its own, so a bundle mounted at /etc/ssl/certs (or named by
// SSL_CERT_FILE) still wins, and a store behind a private CA is trusted through its
// ObjectStore's spec.caBundle as before. Compiling the roots in, rather than copying
// the build machine's bundle into the image, keeps the image the same whichever
// machine builds it, and the roots' version is a module version in go.mod, in the
// SBOM and updated like any dependency.
import _ "golang.org/x/crypto/x509roots/fallback"
