package resync

// Hub permissions of the resync (the project planes need get on the owners' kinds and
// on namespaces, which the gateway path already holds):
//
//   - ConfigMaps: list and watch for the metadata-only anchor cache, delete for
//     collection; get, create and update for the plane identity records in the lease
//     namespace (update notes the Secret a record was verified with and honours an
//     operator's acknowledgement), delete for a retired project's record; list for the
//     tombstones of retired projects.
//   - Namespaces: get, for the deletion switch on the lease namespace.
//   - Secrets: get and list in the provider namespace, to find a project's kubeconfig
//     Secret (metadata only); the shard's namespaced Role already grants them.
//   - Every resource: list, because an anchor's dependents are read, just before it is
//     deleted, from metadata lists of every namespaced kind the hub serves (as the
//     hub's garbage collector does). The lists are made only in ns-<uuid> namespaces
//     and only for metadata, but RBAC cannot say so: this grants listing Secrets too.
//   - Events: create and patch, for collections and halts.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=*,resources=*,verbs=list
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
