package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The logger", func() {
	var (
		out    *bytes.Buffer
		logger lager.Logger
	)

	BeforeEach(func() {
		out = new(bytes.Buffer)
		var err error
		logger, err = newLogger(out, "info")
		Expect(err).NotTo(HaveOccurred())
	})

	lines := func() []map[string]any {
		var logs []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var entry map[string]any
			Expect(json.Unmarshal([]byte(line), &entry)).To(Succeed(), line)
			logs = append(logs, entry)
		}
		return logs
	}

	It("writes RFC 3339 timestamps and level names", func() {
		logger.Info("started", lager.Data{"listen": "127.0.0.1:8085"})
		logs := lines()
		Expect(logs).To(HaveLen(1))
		ts, ok := logs[0]["timestamp"].(string)
		Expect(ok).To(BeTrue(), "timestamp %v is not a string", logs[0]["timestamp"])
		_, err := time.Parse(time.RFC3339Nano, ts)
		Expect(err).NotTo(HaveOccurred())
		Expect(logs[0]).To(HaveKeyWithValue("level", "info"))
		Expect(logs[0]).To(HaveKeyWithValue("message", "opi.started"))
		Expect(logs[0]["data"]).To(HaveKeyWithValue("listen", "127.0.0.1:8085"))
	})

	It("leaves out levels below the configured one", func() {
		logger.Debug("chatty")
		Expect(out.String()).To(BeEmpty())
	})

	It("redacts credentials that reach log data, by key and by value", func() {
		logger.Info("leak", lager.Data{
			"environment":       map[string]string{"VCAP_SERVICES": `{"db":[{"credentials":{"password":"s3cret-1"}}]}`},
			"env":               []string{"DB_PASSWORD=s3cret-2"},
			"registry_password": "s3cret-3",
			"token":             "s3cret-4",
			"body":              `{"environment":{"VCAP_SERVICES":"{\"credentials\":{\"password\":\"s3cret-5\"}}"}}`,
			"url":               "postgres://admin:s3cret-6@db.internal:5432/app",
			"key":               "-----BEGIN EC PRIVATE KEY-----\ns3cret-7\n-----END EC PRIVATE KEY-----",
			// Object names stay searchable.
			"secret":     "dora-0123-env",
			"deployment": "dora-0123",
		})
		logger.Error("failed", errors.New(`dial postgres://admin:s3cret-8@db.internal: refused`), lager.Data{"vcap_services": "s3cret-9"})
		text := out.String()
		for i := 1; i <= 9; i++ {
			Expect(text).NotTo(ContainSubstring("s3cret-"+string(rune('0'+i))), "credential %d reached the log:\n%s", i, text)
		}
		Expect(text).To(ContainSubstring("*REDACTED*"))
		Expect(text).To(ContainSubstring("dora-0123-env"))
		Expect(text).To(ContainSubstring(`"deployment":"dora-0123"`))
	})

	It("redacts API keys, pw, and Basic and Bearer credentials, in data and in the message text", func() {
		// Secret-looking values, as a real leak would carry them: a base64 user:password, a
		// JWT, an API key.
		basic := "Basic YWRtaW46aHVudGVyMg=="
		bearer := "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvcGkifQ.c2lnbmF0dXJl"
		apiKey := "sk_live_51HqLyjWDarjtT1zdp7dc"
		logger.Info("leak", lager.Data{
			"api_key":       apiKey,
			"apikey":        apiKey + "-2",
			"pw":            "hunter2-Xy9!",
			"db_pw":         "Tr0ub4dor&3",
			"header":        basic,
			"authorization": bearer,
			"error":         "registry said 401 to " + bearer,
			"query":         "api_key=" + apiKey + "-3&page=2",
			// Object names and plain words stay searchable.
			"secret": "dora-0123-env",
			"note":   "basic authentication is off",
		})
		logger.Session("callback " + basic).Info("sent " + bearer)
		logger.Info("posted api_key=" + apiKey + "-4")
		text := out.String()
		for _, leaked := range []string{"YWRtaW46aHVudGVyMg", "eyJhbGciOiJSUzI1NiJ9", apiKey, "hunter2-Xy9", "Tr0ub4dor"} {
			Expect(text).NotTo(ContainSubstring(leaked), "reached the log:\n%s", text)
		}
		Expect(text).To(ContainSubstring("dora-0123-env"))
		Expect(text).To(ContainSubstring("basic authentication is off"))
		logs := lines()
		Expect(logs[1]["message"]).To(Equal("opi.callback *REDACTED*"), "the message keeps its start")
		Expect(logs[2]["message"]).To(Equal("opi.posted *REDACTED*"))
	})

	It("refuses an unknown level", func() {
		_, err := newLogger(out, "loud")
		Expect(err).To(HaveOccurred())
	})
})
