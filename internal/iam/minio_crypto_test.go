package iam

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/secure-io/sio-go"
	"golang.org/x/crypto/argon2"
)

// TestAdminBodyRoundTrip: what encryptAdminBody seals, decryptAdminBody opens with the
// same secret key, at sizes around sio's 16 KiB fragments; the header is the format's.
func TestAdminBodyRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 100, 1<<14 - 1, 1 << 14, 1<<14 + 1, 3<<14 + 7} {
		plain := make([]byte, size)
		_, _ = rand.Read(plain)
		sealed, err := encryptAdminBody(context.Background(), "s3cr3t-key", plain)
		if err != nil {
			t.Fatalf("encrypt %d bytes: %v", size, err)
		}
		if len(sealed) < adminHeader || sealed[adminSaltSize] != adminArgon2idAESGCM {
			t.Fatalf("%d bytes: header %x, want salt, id 0 and nonce", size, sealed[:min(len(sealed), adminHeader)])
		}
		if size >= 16 && bytes.Contains(sealed, plain) {
			t.Fatalf("%d bytes: the plaintext is in the ciphertext", size)
		}
		opened, err := decryptAdminBody(context.Background(), "s3cr3t-key", sealed)
		if err != nil {
			t.Fatalf("decrypt %d bytes: %v", size, err)
		}
		if !bytes.Equal(opened, plain) {
			t.Fatalf("%d bytes: round trip changed the data", size)
		}
	}
}

// madminVectors are ciphertexts published with madmin-go's tests (encrypt_test.go,
// decryptDataTests), made by MinIO's own EncryptData from zero bytes: proof that this
// package reads what MinIO writes.
var madminVectors = []struct {
	password string
	zeros    int
	hex      string
}{
	{"", 0, "828aa81599df0651c0461adb82283e8b89956baee9f6e719947ef9cddc849028001dc9d3ac0938f66b07bacc9751437e1985f8a9763c240e81"},
	{`xPl.8/rhR"Q_1xLt`, 32, "b5c016e93b84b473fc8a37af94936563630c36d6df1841d23a86ee51ca161f9e00ac19116b32f643ff6a56a212b265d8c56" +
		"195bb0d12ce199e13dfdc5272f80c1564da2c6fc2fa18da91d8062de02af5cdafea491c6f3cae1f"},
}

func TestAdminBodyMadminVectors(t *testing.T) {
	for _, v := range madminVectors {
		sealed, err := hex.DecodeString(v.hex)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := decryptAdminBody(context.Background(), v.password, sealed)
		if err != nil {
			t.Fatalf("password %q: %v", v.password, err)
		}
		if !bytes.Equal(plain, make([]byte, v.zeros)) {
			t.Errorf("password %q: %x, want %d zero bytes", v.password, plain, v.zeros)
		}
		if _, err := decryptAdminBody(context.Background(), v.password+"x", sealed); !errors.Is(err, errNotAuthentic) {
			t.Errorf("password %q plus a character: %v, want not authentic", v.password, err)
		}
	}
}

// TestAdminBodyRefusesTampering: a changed byte anywhere (salt, id, nonce, stream), a
// cut or an extended stream and a wrong secret key are refused, never decrypted.
func TestAdminBodyRefusesTampering(t *testing.T) {
	plain := bytes.Repeat([]byte("secret answer "), 3000) // three fragments
	sealed, err := encryptAdminBody(context.Background(), "operator-secret", plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, adminSaltSize - 1, adminSaltSize + 1, adminHeader - 1, adminHeader, adminHeader + 1<<14, len(sealed) - 1} {
		bad := bytes.Clone(sealed)
		bad[at] ^= 0x01
		if _, err := decryptAdminBody(context.Background(), "operator-secret", bad); !errors.Is(err, errNotAuthentic) {
			t.Errorf("byte %d changed: %v, want not authentic", at, err)
		}
	}
	bad := bytes.Clone(sealed)
	bad[adminSaltSize] = 7
	if _, err := decryptAdminBody(context.Background(), "operator-secret", bad); err == nil {
		t.Error("an unknown AEAD id was accepted")
	}
	for _, cut := range []int{len(sealed) - 1, len(sealed) - 1<<14, adminHeader + 10} {
		if _, err := decryptAdminBody(context.Background(), "operator-secret", sealed[:cut]); !errors.Is(err, errNotAuthentic) {
			t.Errorf("cut at %d: %v, want not authentic", cut, err)
		}
	}
	if _, err := decryptAdminBody(context.Background(), "operator-secret", append(bytes.Clone(sealed), 0)); !errors.Is(err, errNotAuthentic) {
		t.Errorf("a byte appended: %v, want not authentic", err)
	}
	if _, err := decryptAdminBody(context.Background(), "operator-secret", sealed[:adminHeader-1]); err == nil {
		t.Error("a body shorter than the header was accepted")
	}
	if _, err := decryptAdminBody(context.Background(), "another-secret", sealed); !errors.Is(err, errNotAuthentic) {
		t.Errorf("wrong secret key: %v, want not authentic", err)
	}
}

// TestAdminBodyOtherAEADs: MinIO answers with ChaCha20-Poly1305 where it has no AES
// hardware (id 1), and with PBKDF2 in FIPS mode (id 2); both are read.
func TestAdminBodyOtherAEADs(t *testing.T) {
	for _, id := range []byte{adminArgon2idChaCha20, adminPBKDF2AESGCM} {
		header := make([]byte, adminHeader)
		_, _ = rand.Read(header)
		header[adminSaltSize] = id
		stream, err := adminKey(context.Background(), id, "pw", header[:adminSaltSize])
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.Write(header)
		w := stream.EncryptWriter(&buf, header[adminSaltSize+1:], nil)
		_, _ = w.Write([]byte(`{"accounts":[]}`))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		plain, err := decryptAdminBody(context.Background(), "pw", buf.Bytes())
		if err != nil || string(plain) != `{"accounts":[]}` {
			t.Errorf("id %d: %q, %v", id, plain, err)
		}
	}
	// id 1 is argon2id with ChaCha20-Poly1305, not AES: the same key under AES fails.
	salt := make([]byte, adminSaltSize)
	key := argon2.IDKey([]byte("pw"), salt, argon2idTime, argon2idMemory, argon2idThreads, 32)
	aes, _ := sio.AES_256_GCM.Stream(key)
	var buf bytes.Buffer
	buf.Write(salt)
	buf.WriteByte(adminArgon2idChaCha20)
	buf.Write(make([]byte, adminNonceSize))
	w := aes.EncryptWriter(&buf, make([]byte, adminNonceSize), nil)
	_, _ = w.Write([]byte("x"))
	_ = w.Close()
	if _, err := decryptAdminBody(context.Background(), "pw", buf.Bytes()); !errors.Is(err, errNotAuthentic) {
		t.Errorf("AES stream labelled ChaCha20: %v, want not authentic", err)
	}
}
