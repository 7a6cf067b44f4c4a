package guardrail

import "testing"

// TestPolicyGrammar: only the grammar's keys, in their exact case and each once, with
// values of the right kind. Go-based stores fold the case of keys and keep the last of
// duplicates, so each of these would be read there as something the check never saw.
func TestPolicyGrammar(t *testing.T) {
	runPolicyCases(t, []policyCase{
		// Case variants, at every level.
		{"statement twin of a harmless Statement", `{"Statement":[{` + readGrant + `}],"statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`,
			`the policy has the key "statement"; keys are case-sensitive, write "Statement"`, false},
		{"statement alone", `{"statement":[{` + readGrant + `}]}`, `key "statement"`, false},
		{"version", `{"version":"2012-10-17","Statement":[{` + readGrant + `}]}`, `key "version"`, false},
		{"effect", doc(`"effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Statement[0] has the key "effect"`, false},
		{"Effect beside an effect twin", doc(`"Effect":"Deny","effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `key "effect"`, false},
		{"principal", doc(`"Effect":"Allow","principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `key "principal"`, false},
		{"Principal beside a principal twin", doc(readGrant + `,"principal":"*"`), `key "principal"`, false},
		{"aws principal type", doc(`"Effect":"Allow","Principal":{"aws":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Principal has the key "aws"; keys are case-sensitive, write "AWS"`, false},
		{"AWS beside an aws twin", doc(`"Effect":"Allow","Principal":{"AWS":"a","aws":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `key "aws"`, false},
		{"action", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","action":"s3:PutBucketPolicy","Resource":"arn:aws:s3:::team-a-data/*"`), `key "action"`, false},
		{"resource", doc(readGrant + `,"resource":"arn:aws:s3:::other/*"`), `key "resource"`, false},
		{"notresource", doc(readGrant + `,"notResource":"arn:aws:s3:::other/*"`), `key "notResource"`, false},
		{"condition", doc(readGrant + `,"condition":{}`), `key "condition"`, false},
		{"sid", doc(readGrant + `,"SID":"x"`), `key "SID"`, false},

		// Duplicates, which Unmarshal would resolve silently to the last.
		{"Statement twice", `{"Statement":[{` + readGrant + `}],"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`,
			`the policy has the key "Statement" twice`, false},
		{"Version twice", `{"Version":"2012-10-17","Version":"2008-10-17","Statement":[{` + readGrant + `}]}`, `key "Version" twice`, false},
		{"Effect twice", doc(`"Effect":"Deny","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Statement[0] has the key "Effect" twice`, false},
		{"Principal twice", doc(readGrant + `,"Principal":"*"`), `key "Principal" twice`, false},
		{"Action twice", doc(readGrant + `,"Action":"s3:PutBucketTagging"`), `key "Action" twice`, false},
		{"AWS twice", doc(`"Effect":"Allow","Principal":{"AWS":"a","AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `key "AWS" twice`, false},
		{"condition operator twice", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":"true"},"Bool":{"aws:SecureTransport":"false"}}`), `key "Bool" twice`, false},
		{"condition key twice", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":"true","aws:SecureTransport":"false"}}`), `key "aws:SecureTransport" twice`, false},
		{"condition operators differing in case", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":"true"},"bool":{"aws:SecureTransport":"false"}}`), `keys "Bool" and "bool", which differ only in case`, false},
		{"condition keys differing in case", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":"true","aws:securetransport":"false"}}`), `differ only in case`, false},

		// Unknown keys.
		{"unknown top-level key", `{"Statement":[{` + readGrant + `}],"Extra":1}`, `the policy has the unknown key "Extra"`, false},
		{"unknown statement key", doc(readGrant + `,"Grant":"everything"`), `Statement[0] has the unknown key "Grant"`, false},
		{"unknown principal type", doc(`"Effect":"Allow","Principal":{"Anyone":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `unknown key "Anyone"`, false},

		// Values.
		{"Effect other than Allow or Deny", doc(`"Effect":"allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Effect is "allow"; it must be Allow or Deny`, false},
		{"no Effect", doc(`"Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `must have an Effect`, false},
		{"Effect not a string", doc(`"Effect":true,"Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Effect must be a string`, false},
		{"Version 2008", `{"Version":"2008-10-17","Statement":[{` + readGrant + `}]}`, "", false},
		{"no Version", `{"Id":"x","Statement":[{` + readGrant + `}]}`, "", false},
		{"unknown Version", `{"Version":"2024-01-01","Statement":[{` + readGrant + `}]}`, `Version is "2024-01-01"`, false},
		{"no Action", doc(`"Effect":"Deny","Principal":"*","Resource":"arn:aws:s3:::team-a-data/*"`), `must have either an Action or a NotAction`, false},
		{"Action and NotAction", doc(`"Effect":"Deny","Principal":"*","Action":"s3:GetObject","NotAction":"s3:PutObject","Resource":"arn:aws:s3:::team-a-data/*"`), `either an Action or a NotAction`, false},
		{"Principal and NotPrincipal", doc(readGrant + `,"NotPrincipal":{"AWS":"b"}`), `both Principal and NotPrincipal`, false},
		{"empty Action list", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":[],"Resource":"arn:aws:s3:::team-a-data/*"`), `Action must be a non-empty string`, false},
		{"empty Action", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":"","Resource":"arn:aws:s3:::team-a-data/*"`), `Action must be a non-empty string`, false},
		{"Action of another kind", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":{"s3":"GetObject"},"Resource":"arn:aws:s3:::team-a-data/*"`), `Action must be a non-empty string`, false},
		{"Resource null", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":null`), `Resource must be a non-empty string`, false},
		{"Principal a name", doc(`"Effect":"Allow","Principal":"alice","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Principal must be "*" or an object`, false},
		{"Principal a list", doc(`"Effect":"Allow","Principal":["*"],"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Principal must be "*" or an object`, false},
		{"Principal empty", doc(`"Effect":"Allow","Principal":{},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), `Principal must name a principal`, false},
		{"every principal type", doc(`"Effect":"Allow","Principal":{"AWS":["a","b"],"CanonicalUser":"c","Federated":"d","Service":"e"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "", true},
		{"condition values of every kind", doc(readGrant + `,"Condition":{"NumericLessThan":{"s3:max-keys":10},"Bool":{"aws:SecureTransport":true},"StringLike":{"s3:prefix":["a/*","b/*"]}}`), "", false},
		{"condition value an object", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":{"x":1}}}`), `must be a string, number or boolean`, false},
		{"condition value null", doc(readGrant + `,"Condition":{"Bool":{"aws:SecureTransport":null}}`), `must be a string, number or boolean`, false},
		{"condition operator not an object", doc(readGrant + `,"Condition":{"Bool":"true"}`), `must be an object of condition keys`, false},
		{"condition not an object", doc(readGrant + `,"Condition":"Bool"`), `must be an object of condition operators`, false},
		{"Sid not a string", doc(readGrant + `,"Sid":1`), `Sid must be a string`, false},

		// JSON itself.
		{"not JSON", `{"Statement":`, "not valid JSON", false},
		{"trailing data", `{"Statement":[{` + readGrant + `}]}{"Statement":[]}`, "nothing after it", false},
		{"trailing garbage", `{"Statement":[{` + readGrant + `}]} x`, "nothing after it", false},
		{"invalid UTF-8", "{\"Statement\":[{" + readGrant + ",\"Sid\":\"\xff\"}]}", "not valid UTF-8", false},
		{"escaped key is the key it spells", `{"St\u0061tement":[{` + readGrant + `}]}`, "", false},
		{"escaped case twin", `{"Statement":[{` + readGrant + `}],"st\u0061tement":[]}`, `key "statement"`, false},
	})
}
