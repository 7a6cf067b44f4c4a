package testenv

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Suite is what a suite's TestMain starts once for all its tests: a control plane, one
// server of each store kind it names, and an admin client; Stop undoes it all. The
// integration suite and the e2e suite start the same way through it.
type Suite struct {
	Config  *rest.Config
	Client  client.WithWatch
	Servers []*S3Server
	// KeylessRGW, started with SuiteOptions.Issuer, is a Ceph RGW that serves STS
	// and trusts the issuer (S3Options.RGWSTS).
	KeylessRGW *S3Server

	controlPlane *ControlPlane
	closeServers func()
}

// StartSuite starts the control plane and then the servers of kinds, in order, and
// builds a client with scheme. On error it stops what it started. (The suite sets
// controller-runtime's logger itself: this package stays free of the logging stack,
// which test/manifests would otherwise compile at another version.)
func StartSuite(scheme *runtime.Scheme, kinds ...S3Kind) (*Suite, error) {
	return StartSuiteWith(SuiteOptions{}, scheme, kinds...)
}

// SuiteOptions adjust StartSuiteWith; the zero value is StartSuite.
type SuiteOptions struct {
	// Issuer, when set, is the control plane's ServiceAccount token issuer
	// (ControlPlaneOptions.Issuer): every server of a kind that checks tokens (RGW,
	// Versity) trusts it (S3Server.TrustIssuer), and an RGW serving STS is started
	// besides (Suite.KeylessRGW).
	Issuer *Issuer
}

// StartSuiteWith is StartSuite with options.
func StartSuiteWith(opts SuiteOptions, scheme *runtime.Scheme, kinds ...S3Kind) (*Suite, error) {
	cpOpts := ControlPlaneOptions{}
	if opts.Issuer != nil {
		cpOpts.Issuer = opts.Issuer
	}
	cp, err := StartControlPlaneWith(cpOpts)
	if err != nil {
		return nil, err
	}
	s := &Suite{Config: cp.Config, controlPlane: cp, closeServers: func() {}}
	servers, closeServers, err := StartS3Servers(kinds...)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Servers, s.closeServers = servers, closeServers
	if opts.Issuer != nil {
		if s.KeylessRGW, err = StartS3With(RGW, S3Options{RGWSTS: true}); err != nil {
			s.Stop()
			return nil, err
		}
		for _, srv := range append(servers, s.KeylessRGW) {
			if srv.Kind != RGW && srv.Kind != Versity {
				continue
			}
			if err := srv.TrustIssuer(opts.Issuer); err != nil {
				s.Stop()
				return nil, err
			}
		}
	}
	if s.Client, err = client.NewWithWatch(cp.Config, client.Options{Scheme: scheme}); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops the servers, then the control plane, reporting on stderr what did not stop
// cleanly.
func (s *Suite) Stop() {
	if s.KeylessRGW != nil {
		if err := s.KeylessRGW.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the keyless RGW: %v\n", err)
		}
	}
	s.closeServers()
	if err := s.controlPlane.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
	}
}
