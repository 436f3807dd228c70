package k8s

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/kube"
	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// A docker staging is recorded, before POST /stage answers 202, as one Secret (it holds
// registry credentials) named "staging-<staging guid>" with the labels below. The leader's
// staging worker reads the image's configuration, delivers the result to CC and deletes the
// Secret once CC's callback is settled: what is still owed to CC is exactly the Secrets that
// exist, and survives a restart or a change of leader.
const (
	// SourceTypeStaging marks staging records (opi-bridge.io/source-type).
	SourceTypeStaging = "STG"
	// LabelStagingGUID holds the staging guid.
	LabelStagingGUID = "opi-bridge.io/staging-guid"
	// AnnotationAcceptedAt is when opi accepted the staging (RFC 3339, nanoseconds): the
	// callback's delivery bound counts from it.
	AnnotationAcceptedAt = spec.AnnotationPrefix + "accepted-at"
	// AnnotationStagingAttempts counts the reads of the image begun for a record: the worker
	// raises it before each read starts, so that a read that kills opi (out of memory) is
	// counted too and the next leader sees it.
	AnnotationStagingAttempts = spec.AnnotationPrefix + "staging-attempts"

	stagingNamePrefix = "staging-"

	// Keys of the staging Secret's data.
	stagingKeyImage       = "image"
	stagingKeyCallbackURL = "callback-url"
	stagingKeyServer      = "registry-server"
	stagingKeyUsername    = "registry-username"
	stagingKeyPassword    = "registry-password"
)

var _ opi.Stager = (*Backend)(nil)

// StagingSecretName is the name of the Secret recording a staging.
func StagingSecretName(stagingGUID string) string { return stagingNamePrefix + stagingGUID }

// Stage records the staging as a Secret. A staging whose record exists (still pending) is left
// as it is: the call succeeds without writing.
func (b *Backend) Stage(ctx context.Context, staging *opi.Staging) error {
	secret := toStagingSecret(staging, b.namespace, time.Now())
	_, created, err := kube.CreateIfAbsent(ctx, b.client.CoreV1().Secrets(b.namespace), secret)
	if err != nil {
		return apiError(err, "record staging")
	}
	b.logger.Info("staging-recorded", lager.Data{"staging-guid": staging.GUID, "secret": secret.Name, "created": created})
	return nil
}

func toStagingSecret(s *opi.Staging, namespace string, acceptedAt time.Time) *corev1.Secret {
	data := map[string][]byte{
		stagingKeyImage:       []byte(s.Image),
		stagingKeyCallbackURL: []byte(s.CallbackURL),
	}
	if r := s.PrivateRegistry; r != nil {
		data[stagingKeyServer] = []byte(r.Server)
		data[stagingKeyUsername] = []byte(r.Username)
		data[stagingKeyPassword] = []byte(r.Password)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      StagingSecretName(s.GUID),
			Namespace: namespace,
			Labels: map[string]string{
				LabelStagingGUID:     s.GUID,
				spec.LabelAppGUID:    spec.LabelValue(s.AppGUID),
				spec.LabelSourceType: SourceTypeStaging,
				spec.LabelManagedBy:  spec.ManagedByOPI,
			},
			Annotations: map[string]string{AnnotationAcceptedAt: acceptedAt.UTC().Format(time.RFC3339Nano)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// pendingStaging is a staging record as the worker reads it back.
type pendingStaging struct {
	guid, image, callbackURL string
	registry                 *opi.PrivateRegistry
	acceptedAt               time.Time
	// attempts is how many reads were begun (AnnotationStagingAttempts; unparsable: the bound,
	// since someone other than opi wrote it).
	attempts int
}

func stagingFromSecret(s *corev1.Secret) (pendingStaging, error) {
	p := pendingStaging{
		guid:        s.Labels[LabelStagingGUID],
		image:       string(s.Data[stagingKeyImage]),
		callbackURL: string(s.Data[stagingKeyCallbackURL]),
		acceptedAt:  s.CreationTimestamp.Time,
	}
	if t, err := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationAcceptedAt]); err == nil {
		p.acceptedAt = t
	}
	if v, ok := s.Annotations[AnnotationStagingAttempts]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			n = math.MaxInt32
		}
		p.attempts = n
	}
	if p.guid == "" || p.image == "" || p.callbackURL == "" {
		return p, fmt.Errorf("staging record %s lacks its guid, image or callback url", s.Name)
	}
	if user, ok := s.Data[stagingKeyUsername]; ok {
		p.registry = &opi.PrivateRegistry{
			Server:   string(s.Data[stagingKeyServer]),
			Username: string(user),
			Password: string(s.Data[stagingKeyPassword]),
		}
	}
	return p, nil
}
