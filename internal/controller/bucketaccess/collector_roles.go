package bucketaccess

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// The collector covers the roles of keyless accesses as it covers users: a tenant that
// strips the finalizer from a keyless BucketAccess and deletes it, or re-points it at
// another store, would otherwise leave a role behind whose trust policy still admits
// its ServiceAccount's tokens, and whose policy names buckets by name. A role has no key
// to compare, so the judgement is simpler than a user's: a role of this cluster's form
// stays only while a keyless access that is not being deleted has that name and grants
// on this store, or records this very role (one IAM account behind two stores).

// roleSweep is where one store's sweep of roles stands.
type roleSweep struct {
	marker string // ListRoles marker of the page the sweep is in
	after  string // the last role judged in that page
	// unsupported: the store answered ListRoles NotImplemented for this generation
	// of its spec; it holds no role of ours.
	unsupported bool
	generation  int64
}

// judgeRole says whether a role listed on store goes, why, and whose it was, at now.
func (x *accessIndex) judgeRole(role iam.RoleRef, store string, now time.Time) (bool, string, *accessFacts) {
	f := x.byUser[role.Name]
	switch {
	case f == nil && iam.OwnedUserName(x.clusterID, role.Name):
		return true, "no BucketAccess has it", nil
	case f == nil:
		return false, "", nil // not ours
	case f.deleting:
		return true, verdictAccessDeleting.String(), f
	case !f.keyless:
		return true, "its BucketAccess asks for a key, not a role", f
	case f.store == store:
		return false, "", f
	case f.roleARN != "" && f.roleARN == role.ARN:
		return false, "", f // the same role, seen through another store of its account
	case f.store == "":
		return true, verdictNoGrant.String(), f
	case f.ready && f.issuedOn != f.store && now.Sub(role.Created) < defaults.AccessCollectRoleIssuing:
		// Its access, Ready on another store, has recorded no role there yet: it may
		// be making this very role there right now, through the same IAM account.
		// Once its status records the role, the ARN says; a role left behind goes then.
		return false, "", f
	default:
		return true, verdictMovedAway.String(), f
	}
}

// sweepRoles judges the store's roles from where its sweep stands, within the pass's
// bounds (out counts on from the users' pass), and deletes those no keyless access
// holds: proposed on the cache's word, confirmed against the API server.
func (c *Collector) sweepRoles(ctx context.Context, store *bkv1.ObjectStore, driver iam.Driver, state *collectorState, cached *accessIndex, out *collectPass) error {
	roles, ok := iam.RolesOf(driver)
	sweep := &state.roles
	if sweep.generation != store.Generation {
		*sweep = roleSweep{generation: store.Generation}
	}
	if !ok || sweep.unsupported {
		return nil
	}
	var fresh *accessIndex
	for judged := 0; judged < defaults.AccessCollectMaxUsers; {
		if err := c.pace(ctx, out, 1); err != nil {
			return err
		}
		page, err := roles.ListRoles(ctx, sweep.marker, defaults.AccessCollectPageSize)
		if iam.KindOf(err) == iam.KindNotImplemented {
			sweep.unsupported = true
			return nil
		}
		if err != nil {
			if sweep.marker != "" && iam.KindOf(err) == iam.KindInvalid {
				sweep.marker, sweep.after = "", ""
			}
			return err
		}
		slices.SortFunc(page.Roles, func(a, b iam.RoleRef) int {
			switch {
			case a.Name < b.Name:
				return -1
			case a.Name > b.Name:
				return 1
			}
			return 0
		})
		for _, role := range page.Roles {
			if sweep.after != "" && role.Name <= sweep.after {
				continue
			}
			if judged >= defaults.AccessCollectMaxUsers {
				return nil
			}
			if goes, _, _ := cached.judgeRole(role, store.Name, c.Clock.Now()); goes {
				if fresh == nil {
					if fresh, err = c.index(ctx, c.APIReader); err != nil {
						return err
					}
				}
				goes, why, f := fresh.judgeRole(role, store.Name, c.Clock.Now())
				if goes {
					if out.revoked >= defaults.AccessCollectMaxDeletions {
						return nil
					}
					if err := c.pace(ctx, out, deleteUserCost); err != nil {
						return err
					}
					if err := roles.DeleteRole(ctx, role.Name); err != nil {
						return err
					}
					out.revoked++
					c.reportRole(ctx, store, role.Name, why, f)
				}
			}
			sweep.after = role.Name
			judged++
		}
		sweep.marker, sweep.after = page.Next, ""
		if page.Next == "" {
			return nil
		}
	}
	return nil
}

// collectRoles runs the roles' sweep after the users' pass, within the same bounds.
func (c *Collector) collectRoles(ctx context.Context, store *bkv1.ObjectStore, driver iam.Driver, state *collectorState, out *collectPass) error {
	cached, err := c.index(ctx, c.Client)
	if err != nil {
		return err
	}
	return c.sweepRoles(ctx, store, driver, state, cached, out)
}

// reportRole logs a role's deletion and records an Event: on the access when it still
// exists, else on the store.
func (c *Collector) reportRole(ctx context.Context, store *bkv1.ObjectStore, role, why string, f *accessFacts) {
	log.FromContext(ctx).Info("deleted an IAM role no BucketAccess holds", "store", store.Name, "role", role, "why", why)
	if c.Recorder == nil {
		return
	}
	if f == nil {
		c.Recorder.Eventf(store, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Collect", "deleted IAM role %s and its policy: %s", role, why)
		return
	}
	if c.OnRevoked != nil {
		c.OnRevoked(f.uid)
	}
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.key.Namespace, Name: f.key.Name, UID: f.uid}}
	c.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Collect", "deleted IAM role %s on store %s: %s", role, store.Name, why)
}
