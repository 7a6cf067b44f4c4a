package iam

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/secure-io/sio-go"
	"golang.org/x/crypto/argon2"
)

// MinIO's admin API encrypts the bodies that carry secrets (a new user's password, a
// new service account's secret, the user lists) with a key derived from the caller's
// secret key, so they stay secret even over plain HTTP. The format (madmin-go's
// EncryptData, re-implemented here from its description and test data):
//
//	salt (32 bytes) | AEAD id (1 byte) | nonce (8 bytes) | sio (DARE) stream
//
// The AEAD id says how the key was derived and which AEAD the stream uses: 0 argon2id
// and AES-256-GCM, 1 argon2id and ChaCha20-Poly1305, 2 PBKDF2-SHA256 and AES-256-GCM
// (a MinIO in FIPS mode). argon2id runs with time 1, 64 MiB of memory and 4 threads.
const (
	adminSaltSize  = 32
	adminNonceSize = 8
	adminHeader    = adminSaltSize + 1 + adminNonceSize

	adminArgon2idAESGCM   = 0x00
	adminArgon2idChaCha20 = 0x01
	adminPBKDF2AESGCM     = 0x02

	argon2idTime    = 1
	argon2idMemory  = 64 * 1024 // KiB
	argon2idThreads = 4
	pbkdf2Cost      = 8192
)

// argon2Slot admits one argon2id derivation at a time in this process: each one holds
// 64 MiB, and a burst of admin calls (one collector page per store, every access of a
// store in its own reconcile) must not multiply that. A call waits for it no longer than
// its deadline.
var argon2Slot = make(chan struct{}, 1)

// errNotAuthentic: the body was not encrypted with this secret key, or was changed.
var errNotAuthentic = errors.New("the encrypted body is not authentic (wrong secret key or tampered)")

// adminKey derives the stream key for one body from the secret key and its salt.
func adminKey(ctx context.Context, id byte, secretKey string, salt []byte) (*sio.Stream, error) {
	switch id {
	case adminArgon2idAESGCM, adminArgon2idChaCha20:
		select {
		case argon2Slot <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		key := argon2.IDKey([]byte(secretKey), salt, argon2idTime, argon2idMemory, argon2idThreads, 32)
		<-argon2Slot
		if id == adminArgon2idAESGCM {
			return sio.AES_256_GCM.Stream(key)
		}
		return sio.ChaCha20Poly1305.Stream(key)
	case adminPBKDF2AESGCM:
		key, err := pbkdf2.Key(sha256.New, secretKey, salt, pbkdf2Cost, 32)
		if err != nil {
			return nil, err
		}
		return sio.AES_256_GCM.Stream(key)
	}
	return nil, fmt.Errorf("unknown encryption id %d", id)
}

// encryptAdminBody encrypts a request body for MinIO's admin API: argon2id and
// AES-256-GCM, which every MinIO decrypts.
func encryptAdminBody(ctx context.Context, secretKey string, plaintext []byte) ([]byte, error) {
	header := make([]byte, adminHeader)
	if _, err := rand.Read(header[:adminSaltSize]); err != nil {
		return nil, err
	}
	header[adminSaltSize] = adminArgon2idAESGCM
	if _, err := rand.Read(header[adminSaltSize+1:]); err != nil {
		return nil, err
	}
	stream, err := adminKey(ctx, adminArgon2idAESGCM, secretKey, header[:adminSaltSize])
	if err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(make([]byte, 0, int64(adminHeader+len(plaintext))+stream.Overhead(int64(len(plaintext)))))
	out.Write(header)
	w := stream.EncryptWriter(out, header[adminSaltSize+1:], nil)
	if _, err := w.Write(plaintext); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// decryptAdminBody decrypts a response body of MinIO's admin API. The plaintext is
// never longer than the ciphertext, which the caller has bounded.
func decryptAdminBody(ctx context.Context, secretKey string, ciphertext []byte) ([]byte, error) {
	if len(ciphertext) < adminHeader {
		return nil, errors.New("the encrypted body is shorter than its header")
	}
	salt, id, nonce := ciphertext[:adminSaltSize], ciphertext[adminSaltSize], ciphertext[adminSaltSize+1:adminHeader]
	stream, err := adminKey(ctx, id, secretKey, salt)
	if err != nil {
		return nil, err
	}
	plaintext, err := io.ReadAll(stream.DecryptReader(bytes.NewReader(ciphertext[adminHeader:]), nonce, nil))
	if errors.Is(err, sio.NotAuthentic) {
		return nil, errNotAuthentic
	}
	return plaintext, err
}
