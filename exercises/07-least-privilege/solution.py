"""Reference solution: the NamespaceBaseline operator's own ClusterRole rules, as its deploy/ ships them.

``operatorlab exercise solution 07-least-privilege`` prints them with the reason for each.
"""

import yaml

from operatorlab import paths

CLUSTERROLE = paths.operators_dir() / "namespacebaseline" / "deploy" / "clusterrole.yaml"
RULES = yaml.safe_load(CLUSTERROLE.read_text())["rules"]
