"""What pyproject.toml cannot say: the top-level ``assets/`` folder is installed as the package
``transformer_explorer_assets`` (its files are package data, found with importlib.resources; see
``assets/__init__.py``). ``[tool.setuptools.packages.find]`` finds packages by their folder names
only, so the packages are listed here: every one under ``model/`` and ``explorer/``, and that one.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages(include=["model*", "explorer*"]) + ["transformer_explorer_assets"],
    package_dir={"transformer_explorer_assets": "assets"},
)
