"""Certificates for the gRPC tests, made in the test (Debian's python3-cryptography, on
OpenSSL): a CA, the server's certificate from it (localhost, 127.0.0.1), client certificates
whose subject CN names a tenant, an expired one, a foreign CA's, and a CA's revocation list."""
import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


class CA:
    def __init__(self, directory, name):
        self.dir = directory
        self.name = name
        os.makedirs(directory, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_path = _write(os.path.join(directory, f"{name}-cert.pem"),
                                self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn, server=False, expired=False, tag=None):
        """(cert path, key path) of a certificate for cn signed by this CA (files named by tag)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = (now - 10 * DAY, now - DAY) if expired else (now - DAY, now + 30 * DAY)
        b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(start).not_valid_after(end)
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                   else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                             x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                critical=False)
        cert = b.sign(self.key, hashes.SHA256())
        tag = tag or cn + ("-expired" if expired else "")
        cert_path = _write(os.path.join(self.dir, f"{tag}-cert.pem"), cert.public_bytes(serialization.Encoding.PEM))
        key_path = _write(os.path.join(self.dir, f"{tag}-key.pem"),
                          key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
        return cert_path, key_path

    def crl(self, revoked_cert_paths, name="crl"):
        """Path of a PEM CRL signed by this CA listing the certificates at revoked_cert_paths."""
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateRevocationListBuilder().issuer_name(self.cert.subject)
             .last_update(now - DAY).next_update(now + 7 * DAY))
        for path in revoked_cert_paths:
            with open(path, "rb") as f:
                serial = x509.load_pem_x509_certificate(f.read()).serial_number
            b = b.add_revoked_certificate(x509.RevokedCertificateBuilder().serial_number(serial)
                                          .revocation_date(now - DAY).build())
        crl = b.sign(self.key, hashes.SHA256())
        return _write(os.path.join(self.dir, f"{name}.pem"), crl.public_bytes(serialization.Encoding.PEM))
