package localpeers

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig for cfg, the envtest admin user, whose cluster,
// user and context are all called name and whose context's namespace is namespace: a
// client certificate (CN admin, group system:masters) signed by the CA the apiserver
// was started with, which the apiserver accepts through --client-ca-file. envtest
// mints that CA afresh on every start, so the file is useless once the control plane
// has stopped.
func WriteKubeconfig(path, name, namespace string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path) // 0600: the file holds a private key
}
