"""Reading the cluster: the one door to the Kubernetes API (`kube`), the informers that list and
watch through it (`informer`), and what they decode of the objects they read (`shapes`)."""
