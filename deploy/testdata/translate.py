"""Translate template.yaml with the SAM translator, as CloudFormation does on
deploy, and print the resulting CloudFormation template as JSON.

Usage: translate.py TEMPLATE [PARAMETERS_JSON]

CloudFormation evaluates parameters before it runs the transform, so a
CommaDelimitedList reaches it as a list; defaults are treated the same way
here. CodeUri values are replaced by S3 URIs, as `sam deploy` does after
uploading the code. Nothing here talks to AWS.
"""
import json
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The template uses inline policies only; no lookup is needed."""

    def load(self):
        return {}


def main():
    with open(sys.argv[1]) as f:
        template = yaml_parse(f.read())
    overrides = (json.loads(sys.argv[2]) if len(sys.argv) > 2 else None) or {}
    params = {}
    for name, spec in template.get("Parameters", {}).items():
        if "Default" not in spec:
            continue
        value = spec["Default"]
        if spec.get("Type") == "CommaDelimitedList":
            value = [v.strip() for v in str(value).split(",")]
        params[name] = value
    params.update(overrides)
    for res in template.get("Resources", {}).values():
        if res.get("Type") == "AWS::Serverless::Function":
            res.setdefault("Properties", {})["CodeUri"] = "s3://deploy-bucket/code.zip"
    globals_fn = template.get("Globals", {}).get("Function", {})
    if "CodeUri" in globals_fn:
        globals_fn["CodeUri"] = "s3://deploy-bucket/code.zip"
    out = transform(template, params, NoManagedPolicies())
    json.dump(out, sys.stdout, indent=1, default=str)


if __name__ == "__main__":
    main()
