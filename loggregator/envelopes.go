package loggregator

import (
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// Identity is who an envelope is about: source_id (the app guid), instance_id (the index CC
// shows) and the tags every envelope of the instance carries.
type Identity struct {
	SourceID   string
	InstanceID string
	Tags       map[string]string
}

// AppTags are the tags CF puts on an app instance's logs and metrics; Map leaves out the empty
// ones.
type AppTags struct {
	// SourceType is ProcessSourceType or TaskSourceType (logs only; "" on metrics).
	SourceType  string
	AppID       string
	AppName     string
	SpaceID     string
	SpaceName   string
	OrgID       string
	OrgName     string
	ProcessID   string
	ProcessType string
	// ProcessInstanceID is the instance's guid (CC's instance guid), not its index.
	ProcessInstanceID string
}

// Map is the tags as an envelope carries them.
func (a AppTags) Map() map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{
		"source_type":         a.SourceType,
		"app_id":              a.AppID,
		"app_name":            a.AppName,
		"space_id":            a.SpaceID,
		"space_name":          a.SpaceName,
		"organization_id":     a.OrgID,
		"organization_name":   a.OrgName,
		"process_id":          a.ProcessID,
		"process_type":        a.ProcessType,
		"process_instance_id": a.ProcessInstanceID,
	} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// ProcessSourceType is the source_type of a process's logs: APP/PROC/<TYPE IN UPPER CASE>.
func ProcessSourceType(processType string) string {
	return "APP/PROC/" + strings.ToUpper(processType)
}

// TaskSourceType is the source_type of a task's logs: APP/TASK/<task name>.
func TaskSourceType(taskName string) string { return "APP/TASK/" + taskName }

// NewLog is a log envelope of id at t (the line's own timestamp): OUT for stdout, ERR for
// stderr.
func NewLog(id Identity, t time.Time, typ loggregator_v2.Log_Type, payload []byte) *loggregator_v2.Envelope {
	return &loggregator_v2.Envelope{
		Timestamp:  t.UnixNano(),
		SourceId:   id.SourceID,
		InstanceId: id.InstanceID,
		Tags:       copyTags(id.Tags),
		Message: &loggregator_v2.Envelope_Log{Log: &loggregator_v2.Log{
			Payload: append([]byte(nil), payload...),
			Type:    typ,
		}},
	}
}

// Usage is what an instance uses and may use, as the container gauges report it.
type Usage struct {
	// CPUPercent is the share of one core (100 = one core busy).
	CPUPercent       float64
	MemoryBytes      uint64
	DiskBytes        uint64
	MemoryQuotaBytes uint64
	DiskQuotaBytes   uint64
}

// NewContainerMetrics is the gauge envelope Diego's rep sends for an instance every 15 s:
// cpu (percentage), memory, disk, memory_quota and disk_quota (bytes).
func NewContainerMetrics(id Identity, t time.Time, u Usage) *loggregator_v2.Envelope {
	bytes := func(v uint64) *loggregator_v2.GaugeValue {
		return &loggregator_v2.GaugeValue{Unit: "bytes", Value: float64(v)}
	}
	return &loggregator_v2.Envelope{
		Timestamp:  t.UnixNano(),
		SourceId:   id.SourceID,
		InstanceId: id.InstanceID,
		Tags:       copyTags(id.Tags),
		Message: &loggregator_v2.Envelope_Gauge{Gauge: &loggregator_v2.Gauge{Metrics: map[string]*loggregator_v2.GaugeValue{
			"cpu":          {Unit: "percentage", Value: u.CPUPercent},
			"memory":       bytes(u.MemoryBytes),
			"disk":         bytes(u.DiskBytes),
			"memory_quota": bytes(u.MemoryQuotaBytes),
			"disk_quota":   bytes(u.DiskQuotaBytes),
		}}},
	}
}

// copyTags keeps envelopes apart from the caller's map (it is shared by an instance's lines).
func copyTags(tags map[string]string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for k, v := range tags {
		m[k] = v
	}
	return m
}

// The field numbers of loggregator.v2's Envelope and Log messages (envelope.proto) that
// LogEncoder writes.
const (
	fieldTimestamp  protowire.Number = 1
	fieldSourceID   protowire.Number = 2
	fieldLog        protowire.Number = 4
	fieldInstanceID protowire.Number = 8
	fieldTags       protowire.Number = 9
	fieldMapKey     protowire.Number = 1
	fieldMapValue   protowire.Number = 2
	fieldLogPayload protowire.Number = 1
	fieldLogType    protowire.Number = 2
)

// LogEncoder writes one instance's log envelopes in protobuf's wire format, the same envelope
// NewLog builds: its identity (source_id, instance_id and the tags) is encoded once, in
// NewLogEncoder, and each line adds only its timestamp, type and payload. A node agent's lines
// cost no map, no envelope and no reflection each. Safe for concurrent use (it is read only).
type LogEncoder struct {
	head []byte
}

// NewLogEncoder encodes id for the log envelopes of Encode. Strings that are not UTF-8 (protobuf
// strings must be) have their bad bytes replaced, as no receiver could decode them otherwise.
func NewLogEncoder(id Identity) *LogEncoder {
	var b []byte
	b = appendString(b, fieldSourceID, id.SourceID)
	b = appendString(b, fieldInstanceID, id.InstanceID)
	keys := make([]string, 0, len(id.Tags))
	for k := range id.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var entry []byte
		entry = appendString(entry, fieldMapKey, k)
		entry = appendString(entry, fieldMapValue, id.Tags[k])
		b = protowire.AppendTag(b, fieldTags, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return &LogEncoder{head: b}
}

func appendString(b []byte, n protowire.Number, s string) []byte {
	if s == "" {
		return b // proto3's default: not on the wire
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// Encode is the envelope of one line at t (the line's own timestamp), OUT for stdout and ERR
// for stderr, in protobuf's wire format (EmitEncoded's), in a slice of its own.
func (e *LogEncoder) Encode(t time.Time, typ loggregator_v2.Log_Type, payload string) []byte {
	logSize := 0
	if len(payload) > 0 {
		logSize += protowire.SizeTag(fieldLogPayload) + protowire.SizeBytes(len(payload))
	}
	if typ != 0 {
		logSize += protowire.SizeTag(fieldLogType) + protowire.SizeVarint(uint64(typ))
	}
	ts := uint64(t.UnixNano())
	size := len(e.head) + protowire.SizeTag(fieldLog) + protowire.SizeBytes(logSize)
	if ts != 0 {
		size += protowire.SizeTag(fieldTimestamp) + protowire.SizeVarint(ts)
	}
	b := make([]byte, 0, size)
	if ts != 0 {
		b = protowire.AppendTag(b, fieldTimestamp, protowire.VarintType)
		b = protowire.AppendVarint(b, ts)
	}
	b = append(b, e.head...)
	b = protowire.AppendTag(b, fieldLog, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(logSize))
	if len(payload) > 0 {
		b = protowire.AppendTag(b, fieldLogPayload, protowire.BytesType)
		b = protowire.AppendString(b, payload)
	}
	if typ != 0 {
		b = protowire.AppendTag(b, fieldLogType, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(typ))
	}
	return b
}
